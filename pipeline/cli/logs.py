"""One logging setup for the process: UTC text lines or ECS JSON lines."""

from __future__ import annotations

import json
import logging
import sys
import time


class _EcsJsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "@timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "log.level": record.levelname.lower(),
            "log.logger": record.name,
            "message": record.getMessage(),
            "ecs.version": "8.11.0",
        }
        if record.exc_info:
            doc["error.stack_trace"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def _without_transport_traces(record: logging.LogRecord) -> bool:
    """Keep the client's own warnings (a node failed, a request is retried) to one line: the
    connection error they carry is already in the message, its traceback says nothing more.
    At DEBUG they are kept."""
    quiet = logging.getLogger().getEffectiveLevel() > logging.DEBUG
    if quiet and record.name.startswith("elastic_transport") and record.levelno < logging.ERROR:
        record.exc_info = None
        record.exc_text = None
    return True


def setup_logging(level: str, as_json: bool) -> None:
    """One logging setup for the process: UTC timestamps, or ECS JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    if as_json:
        handler.setFormatter(_EcsJsonFormatter())
    else:
        fmt = logging.Formatter("%(asctime)sZ %(levelname)s %(name)s: %(message)s")
        fmt.converter = time.gmtime
        handler.setFormatter(fmt)
    handler.addFilter(_without_transport_traces)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("elastic_transport").setLevel(logging.WARNING)
    logging.getLogger("watchdog").setLevel(logging.WARNING)
