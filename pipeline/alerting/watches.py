"""Watcher definitions for licensed clusters: ``kibana/watches/*.json``, one watch per file.

``{namespace}`` in a watch's text stands for the data streams' namespace; the watch's id is
``iolens-<file stem>-<namespace>``. Installed by ``iolens setup`` only when the licence allows
Watcher (:data:`pipeline.alerting.install.WATCHER_LICENCES`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pipeline.kibana import DEFAULT_DIR
from pipeline.records.json import JsonObject
from pipeline.settings import Settings

WATCHES_DIR = DEFAULT_DIR / "watches"
"""The packaged ``kibana/watches/`` (found as :data:`pipeline.kibana.DEFAULT_DIR` is)."""


def watches(settings: Settings, root: Path = WATCHES_DIR) -> Iterator[tuple[str, JsonObject]]:
    """The Watcher definitions of ``root`` for the namespace: ``(id, body)``.

    ``{namespace}`` in a watch's text is replaced by the data streams' namespace.

    Raises:
        ValueError: a file is not JSON.
    """
    ns = settings.elasticsearch.namespace
    for path in sorted(root.glob("*.json")):
        text = path.read_text(encoding="utf-8").replace("{namespace}", ns)
        try:
            yield f"iolens-{path.stem}-{ns}", json.loads(text)
        except ValueError as err:
            raise ValueError(f"{path}: not JSON ({err})") from None
