"""A minimal client for Kibana's HTTP API: JSON requests and the saved-objects import.

Every request carries ``kbn-xsrf`` (Kibana refuses writes without it) and Basic or ``ApiKey``
authentication; a 404 is an answer (the object is absent), every other status of 400 and above
is a :class:`KibanaError` naming the request. Used by ``iolens setup --kibana-url`` for the saved
objects (:mod:`pipeline.kibana`) and the alert rules (:mod:`pipeline.alerting`).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from typing import Any

from pipeline.records.json import JsonObject, Response


class KibanaError(RuntimeError):
    """Kibana answered with an error (or not at all); the message names the request."""


def _multipart(ndjson: bytes, boundary: str) -> bytes:
    """``ndjson`` as the form field ``file`` of a ``multipart/form-data`` body."""
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="iolens.ndjson"\r\nContent-Type: application/ndjson\r\n\r\n'
    )
    return head.encode() + ndjson + f"\r\n--{boundary}--\r\n".encode()


def _import_errors(body: Response) -> str:
    """``type/id: error type`` of each object an import response says failed."""
    return "; ".join(
        f"{e.get('type')}/{e.get('id')}: {e.get('error', {}).get('type')}"
        for e in body.get("errors", [])
    )


class Kibana:
    """A minimal Kibana API client (``kbn-xsrf`` on every request).

    Args:
        url: Kibana's base URL, e.g. ``http://localhost:5601`` (a space: ``.../s/<space>``).
        username, password / api_key: Basic or ``ApiKey`` authentication.
        timeout_s: per request.
    """

    def __init__(
        self,
        url: str,
        *,
        username: str | None = None,
        password: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.headers = {"kbn-xsrf": "true"}
        if api_key:
            self.headers["Authorization"] = f"ApiKey {api_key}"
        elif username:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"
        self.timeout_s = timeout_s

    def _build(
        self, method: str, path: str, payload: bytes | None, content_type: str
    ) -> urllib.request.Request:
        req = urllib.request.Request(f"{self.url}{path}", data=payload, method=method)
        for k, v in self.headers.items():
            req.add_header(k, v)
        if payload is not None:
            req.add_header("Content-Type", content_type)
        return req

    def request(
        self,
        method: str,
        path: str,
        body: JsonObject | None = None,
        *,
        data: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        """One request; ``(status, parsed JSON body)``; 404 is returned, not raised.

        Raises:
            KibanaError: no answer, or a status of 400 and above other than 404.
        """
        payload = data if data is not None else (json.dumps(body).encode() if body else None)
        req = self._build(method, path, payload, content_type)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as err:
            raw = err.read()
            if err.code == 404:
                return 404, None
            raise KibanaError(
                f"{method} {path}: {err.code} {raw.decode(errors='replace')[:300]}"
            ) from None
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            raise KibanaError(f"{method} {path}: no answer from {self.url} ({err})") from None

    def import_objects(self, ndjson: bytes) -> Response:
        """``POST /api/saved_objects/_import?overwrite=true`` of ``ndjson``; the response.

        Raises:
            KibanaError: the request failed, or the response says ``success: false`` (each
                failed object named with its error).
        """
        boundary = f"iolens-{uuid.uuid4().hex}"
        status, body = self.request(
            "POST",
            "/api/saved_objects/_import?overwrite=true",
            data=_multipart(ndjson, boundary),
            content_type=f"multipart/form-data; boundary={boundary}",
        )
        if status == 404 or not isinstance(body, Mapping):
            raise KibanaError("the saved-objects import API is missing (Kibana 8 needed)")
        if not body.get("success"):
            raise KibanaError(f"saved-objects import failed: {_import_errors(body) or body}")
        return body
