"""The workload model of an events drop: requests placed in clusters, kept across runs.

Seed 002, section 5: each finished request (its canonical form,
:func:`pipeline.reducers.canonical.canonical`) is placed incrementally by
:class:`pipeline.reducers.request_cluster.Clusterer`; the model is saved as JSON and its snapshots
become ``metrics-iolens.workload_model`` documents.
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from pathlib import Path

from pipeline.formats.events.encode import model_documents
from pipeline.records.core import Document
from pipeline.reducers.canonical import Canonical
from pipeline.reducers.request_cluster import Assignment, Clusterer
from pipeline.settings import RequestsSettings
from pipeline.sink.disk import is_disk_full
from pipeline.sink.documents import DocContext

log = logging.getLogger(__name__)

RECENT_IDS = 1 << 16
"""Request ids a model remembers, so a request read again after a restart is not counted
twice (the replay after a crash is bounded by the schema's timeout)."""


class WorkloadModel:
    """The workload model of one events drop (seed 002, section 5), kept across runs.

    Requests are placed incrementally (:class:`pipeline.reducers.request_cluster.Clusterer`);
    the model (clusters with their representatives and counters) is saved as JSON at
    ``path`` with every snapshot and when the shipper stops, and continued on the next start.
    It remembers the cluster its last snapshot went to: a model read on with another cluster
    (its requests read again there with ``--redeliver``) snapshots at once, although requests
    it placed before do not change it.

    Args:
        name: the model's name (the schema file's stem): ``iolens.*.model`` in documents.
        path: where the model is kept.
        settings: threshold and snapshot period.

    Raises:
        ValueError: the file at ``path`` exists but is not a saved model.
    """

    def __init__(self, name: str, path: Path, settings: RequestsSettings) -> None:
        self.name, self.path, self.settings = name, path, settings
        self.clusterer = Clusterer(settings.threshold)
        self.measured: dict[str, float] = {}
        # oldest first; an OrderedDict forgets its oldest in O(1) (a dict's first key is found
        # by skipping the slots of every key deleted since it was last resized)
        self.recent: OrderedDict[str, None] = OrderedDict()
        self.changed = False
        self.last_snapshot_s: float | None = None
        self.snapshot_cluster: str | None = None
        if path.exists():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
                self.clusterer = Clusterer.from_state(state["clusterer"])
                self.measured = {str(k): float(v) for k, v in state["measured"].items()}
                self.recent = OrderedDict.fromkeys(state["recent"])
                self.snapshot_cluster = state.get("cluster")
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{path}: not a saved workload model ({err})") from None
            if self.clusterer.threshold != settings.threshold:
                log.warning(
                    "%s was built with threshold %g; requests.threshold %g applies to new "
                    "clusters only",
                    path,
                    self.clusterer.threshold,
                    settings.threshold,
                )
                self.clusterer.threshold = settings.threshold

    def place(self, request_id: str, form: Canonical) -> tuple[Assignment, bool]:
        """Add one request (canonical form) unless its id was placed already; its cluster,
        distance and outlier flag."""
        if request_id in self.recent:
            a = self.clusterer.nearest(form)
            return a, self.clusterer.is_outlier(a.cluster, a.distance)
        a = self.clusterer.add(form)
        for k, v in form.resources.items():
            self.measured[k] = self.measured.get(k, 0.0) + v
        self.recent[request_id] = None
        if len(self.recent) > RECENT_IDS:
            self.recent.popitem(last=False)
        self.changed = True
        return a, self.clusterer.is_outlier(a.cluster, a.distance)

    def due(self, now_s: float, final: bool = False, cluster: str | None = None) -> bool:
        """Whether a snapshot is due: the last one went to a cluster other than ``cluster``
        (when both are known); or requests were placed since the last one, and
        ``snapshot_s`` has passed (the first one is due at once) or the shipper is stopping
        (``final``). A last snapshot "in the future" (the clock was set back since) counts as
        taken now, so the next one waits ``snapshot_s``, not the hours the clock went back."""
        if self.last_snapshot_s is not None and self.last_snapshot_s > now_s:
            self.last_snapshot_s = now_s
        if cluster is not None and self.snapshot_cluster not in (None, cluster) and self.recent:
            return True
        if not self.changed:
            return False
        last = self.last_snapshot_s
        return final or last is None or now_s - last >= self.settings.snapshot_s

    def snapshot(
        self, ctx: DocContext, host: str, now_s: float, cluster: str | None = None
    ) -> list[Document]:
        """The model's documents now (one per cluster), and the model saved; ``cluster``: the
        cluster they go to (None: unknown, the one remembered is kept)."""
        self.last_snapshot_s = now_s
        self.changed = False
        self.snapshot_cluster = cluster or self.snapshot_cluster
        self.save()
        return list(
            model_documents(
                ctx, host, self.clusterer, self.measured, now_s * 1000, now_s * 1000, self.name
            )
        )

    def save(self) -> None:
        """Write the model to ``path`` (atomically: a temporary file renamed over it). On a
        full disk it is left as it was and saved again next time.

        Raises:
            OSError: another failure to write it.
        """
        state = {
            "clusterer": self.clusterer.state(),
            "measured": self.measured,
            "recent": list(self.recent),
            "cluster": self.snapshot_cluster,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(state, separators=(",", ":")), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            if not is_disk_full(err):
                raise
            self.changed = True  # saved again at the next snapshot or close
            log.debug("workload model %s not saved (the disk is full): %s", self.path, err)
