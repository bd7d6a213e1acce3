"""The user/setup error type, importable without loading the configuration machinery."""

from __future__ import annotations


class ConfigError(Exception):
    """A user or setup error: bad configuration, unreachable cluster. The message names the fix."""
