"""Deterministic document ids: the same inputs give the same ``_id``, so a replay after a crash
is a 409 (a duplicate), never a second document. Used by the sink's document builders and by
reducers whose results are documents updated in place (incidents)."""

from __future__ import annotations

import base64
import hashlib


def doc_id(*parts: object) -> str:
    """A 24-character url-safe id: the first 18 bytes of sha256 over the parts.

    Args:
        parts: the values that identify the document; joined by ``str()`` with ``\\x1f``.
    """
    h = hashlib.sha256("\x1f".join(map(str, parts)).encode())
    return base64.urlsafe_b64encode(h.digest()[:18]).decode()
