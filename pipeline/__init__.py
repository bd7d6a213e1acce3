"""iolens: an Elasticsearch-backed observability pipeline for storage and HPC I/O performance."""

__version__ = "0.2.0"
