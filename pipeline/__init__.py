"""iolens: an Elasticsearch-backed observability pipeline for storage and HPC I/O performance."""

__version__ = "0.1.0"
