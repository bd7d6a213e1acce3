"""IOMiner's query interface over Elasticsearch, returning pandas DataFrames (seed 004 §II-A)."""

from __future__ import annotations

from pipeline.query.expr import ColumnError, FilterSyntaxError, normalize, parse_quantity
from pipeline.query.miner import IOMiner, to_timestamp
from pipeline.query.tuples import Tuples

__all__ = [
    "ColumnError",
    "FilterSyntaxError",
    "IOMiner",
    "Tuples",
    "normalize",
    "parse_quantity",
    "to_timestamp",
]
