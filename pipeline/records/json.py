"""JSON at the boundary, named by what it is.

Inside the pipeline, data crossing stages is typed (the records of this package, the
dataclasses of each stage). What enters or leaves as JSON keeps the shape JSON gives it, and
its type says which JSON it is: a document's source as it is built or read, a request to the
cluster, a response from it, or a JSON object read or written whole (templates, saved objects,
state files, configuration). Use these only at that boundary: data that stays inside gets a
record type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

SourceFields: TypeAlias = dict[str, Any]
"""The fields of a document being built, to be written to a data stream (``_source``)."""

Source: TypeAlias = Mapping[str, Any]
"""A document's ``_source`` (or a part of it) as read back from the cluster or the spool."""

Query: TypeAlias = Mapping[str, Any]
"""A request to the cluster: a query DSL clause, a sort clause, aggregations, a request body."""

Response: TypeAlias = Mapping[str, Any]
"""A response from the cluster or Kibana, or a part of one (a hit, a bucket, an item)."""

JsonObject: TypeAlias = dict[str, Any]
"""A JSON object read or written whole: an index template, a Kibana saved object or rule, a
state file, a configuration file, a line of a JSON-lines input."""
