"""Drop formats, one package each: its decoder, reducers, document encoder and shipper
(tail) together. :mod:`pipeline.formats.registry` lists them; formats never import each other."""
