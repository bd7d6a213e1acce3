"""Delivery: from Elasticsearch's acknowledgements to committed file offsets.

The delivery promise (DESIGN.md, data flow step 5): a file's offset in the registry advances
only once every document derived from the bytes before it was acknowledged.
:mod:`pipeline.delivery.acks` keeps, per file, what each line read still waits for;
:mod:`pipeline.delivery.commit` settles lines as results and acknowledgements come in and
commits the offsets (with the reader's cursor) that became safe. It sits between the shippers
(the registry it commits to) and the jobs that wire it to the sink.
"""
