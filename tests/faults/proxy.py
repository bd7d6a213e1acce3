"""A fault-injecting HTTP proxy in front of a real Elasticsearch-API server.

Every request is forwarded as it came (method, path, headers, body) and the server's answer is
handed back, except that the items of ``_bulk`` answers can be rewritten: a :data:`Rule` looks
at each item (its document id, its position in the request, how many times that id was sent)
and returns the fault to inject, or ``None``. Two kinds of fault:

* :class:`Fail` (429, 503, ...): the item *was* forwarded and the server indexed it; only its
  answer is replaced (status and error) and ``errors: true`` set, as when a node indexes a
  document and its answer is lost. A retry of the document then gets a real 409.
* :class:`Reject` (400 mapping errors): the item is taken out of the request before it is
  forwarded, so the server never sees it, and an answer is made up for it at its position.

The proxy counts what it was sent, per document id (``sent``), so a test can tell exactly which
documents were sent again.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te", "trailer"}
)
"""Headers that describe one connection, not the message (RFC 9110 7.6.1), never forwarded."""


@dataclass(frozen=True)
class Item:
    """One action of a ``_bulk`` request, as a rule sees it.

    Attributes:
        doc_id: the action's ``_id``; index: its ``_index`` (empty if the path names it).
        position: 0-based position in the request; attempt: 1 for the first time this id was
            sent to the proxy, 2 for the second, ...
    """

    doc_id: str
    index: str
    position: int
    attempt: int


@dataclass(frozen=True)
class Fail:
    """Forward the item, then replace its answer with ``status`` and this error."""

    status: int
    error_type: str
    reason: str


@dataclass(frozen=True)
class Reject:
    """Do not forward the item; answer ``status`` with this error for it."""

    status: int
    error_type: str
    reason: str


Rule = Callable[[Item], Fail | Reject | None]
"""What to do to one bulk item (``None``: nothing)."""


def _error(status: int, error_type: str, reason: str) -> dict[str, Any]:
    return {"status": status, "error": {"type": error_type, "reason": reason}}


class FaultProxy:
    """The proxy, listening on a free loopback port (a thread; :meth:`close` stops it).

    Args:
        upstream: the real server's URL (``http://127.0.0.1:PORT``).
        rule: the faults to inject into bulk items.
    """

    def __init__(self, upstream: str, rule: Rule) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.rule = rule
        self.sent: Counter[str] = Counter()
        """Times each document id came in a bulk request."""
        self.forwarded: Counter[str] = Counter()
        """Times each document id was forwarded to the server."""
        self.injected: list[tuple[Item, Fail | Reject]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """Where clients connect."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        """Stop listening and wait for the serving thread."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send one request to the server; its status, headers and body."""
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            conn.request(method, path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_HEADERS]
            return resp.status, kept, data
        finally:
            conn.close()

    def bulk(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, Any, bytes]:
        """Forward a bulk request without its rejected items, and rewrite the answer."""
        lines = [ln for ln in body.split(b"\n") if ln.strip()]
        pairs = [(lines[i], lines[i + 1]) for i in range(0, len(lines), 2)]
        faults: list[Fail | Reject | None] = []
        with self.lock:
            for position, (action, _source) in enumerate(pairs):
                meta = next(iter(json.loads(action).values()))
                doc_id = str(meta.get("_id"))
                self.sent[doc_id] += 1
                item = Item(doc_id, str(meta.get("_index", "")), position, self.sent[doc_id])
                fault = self.rule(item)
                faults.append(fault)
                if fault is not None:
                    self.injected.append((item, fault))
                if not isinstance(fault, Reject):
                    self.forwarded[doc_id] += 1
        kept = [p for p, f in zip(pairs, faults, strict=True) if not isinstance(f, Reject)]
        if kept:
            payload = b"".join(a + b"\n" + s + b"\n" for a, s in kept)
            status, resp_headers, data = self.forward(method, path, headers, payload)
            if status != 200:
                return status, resp_headers, data
            answer = iter(json.loads(data)["items"])
        else:
            resp_headers, answer = [("X-Elastic-Product", "Elasticsearch")], iter([])
        items: list[dict[str, Any]] = []
        for (action, _source), fault in zip(pairs, faults, strict=True):
            op = next(iter(json.loads(action)))
            if isinstance(fault, Reject):
                items.append({op: _error(fault.status, fault.error_type, fault.reason)})
                continue
            real = next(answer)
            if isinstance(fault, Fail):
                real = {op: _error(fault.status, fault.error_type, fault.reason)}
            items.append(real)
        errors = any(int(next(iter(it.values())).get("status", 200)) >= 300 for it in items)
        return 200, resp_headers, json.dumps({"errors": errors, "items": items}).encode()


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the test reads the counters

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            headers["Accept-Encoding"] = "identity"  # bulk answers are read and rewritten
            if self.command in ("POST", "PUT") and urlsplit(self.path).path.endswith("/_bulk"):
                status, out_headers, data = proxy.bulk(self.command, self.path, headers, body)
                out_headers = [(k, v) for k, v in out_headers if k.lower() != "content-encoding"]
            else:
                status, out_headers, data = proxy.forward(self.command, self.path, headers, body)
            self.send_response(status)
            for k, v in out_headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

    return Handler
