"""The base of every configuration section: frozen and closed to unknown keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """A frozen model that refuses unknown keys (a misspelt key is an error naming it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
