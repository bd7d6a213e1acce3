"""Building the Elasticsearch client from settings, and a plain "does anything answer" probe.

This package is the only place that imports ``elasticsearch`` (STYLE.md, practice 2).
"""

from __future__ import annotations

import logging
import ssl
import urllib.error
import urllib.request

from elasticsearch import Elasticsearch

from pipeline.settings import ElasticsearchSettings

log = logging.getLogger(__name__)


def make_client(
    es: ElasticsearchSettings, url: str | None = None, *, max_retries: int = 3
) -> Elasticsearch:
    """An :class:`~elasticsearch.Elasticsearch` client for the configured cluster.

    Args:
        es: connection settings. ``api_key`` wins over ``username``/``password`` when both are
            set; ``ca_certs`` and ``verify_certs`` configure TLS; ``request_timeout_s`` is the
            per-request timeout in seconds.
        url: overrides ``es.url`` (e.g. the URL of the embedded server that was started).
        max_retries: retries the transport itself makes on connection errors and on
            429/502/503/504 before raising (elastic-transport's default is 3). The bulk sink owns
            its retry loop with backoff, so it may pass 0.

    Returns:
        A client; nothing is sent until the first request.
    """
    kwargs: dict[str, object] = {
        "request_timeout": es.request_timeout_s,
        "verify_certs": es.verify_certs,
        "max_retries": max_retries,
        "retry_on_timeout": False,
    }
    kwargs.update(_credentials_and_tls(es))
    return Elasticsearch(url or es.url, **kwargs)  # type: ignore[arg-type]


def _credentials_and_tls(es: ElasticsearchSettings) -> dict[str, object]:
    """The client's keyword arguments for authentication (``api_key`` before basic auth) and
    TLS (``ca_certs``; no warning when certificates are not verified)."""
    kwargs: dict[str, object] = {}
    if es.api_key:
        kwargs["api_key"] = es.api_key
    elif es.username is not None:
        kwargs["basic_auth"] = (es.username, es.password or "")
    if es.ca_certs:
        kwargs["ca_certs"] = es.ca_certs
    if not es.verify_certs:
        kwargs["ssl_show_warn"] = False
    return kwargs


def ping_url(url: str, timeout: float, *, ssl_context: ssl.SSLContext | None = None) -> bool:
    """Whether an HTTP server answers ``GET url`` within ``timeout`` seconds. Never raises.

    Any HTTP response counts, including 401/403 from a secured cluster, and so does a TLS
    handshake failure (something speaking TLS is listening there; the client will report the
    certificate problem properly). Connection refused, DNS failure, timeouts and malformed
    URLs give ``False``.

    Args:
        url: e.g. ``http://localhost:9200``.
        timeout: seconds for connecting and reading.
        ssl_context: for ``https`` URLs with a private CA; ``None`` uses the system defaults.
    """
    try:
        req = urllib.request.Request(url, method="GET")
        with urllib.request.urlopen(req, timeout=timeout, context=ssl_context):
            return True
    except urllib.error.HTTPError:
        return True
    except urllib.error.URLError as err:
        if isinstance(err.reason, ssl.SSLError):
            return True
        log.debug("nothing answered at %s: %s", url, err.reason)
        return False
    except (OSError, ValueError) as err:
        log.debug("nothing answered at %s: %s", url, err)
        return False


Client = Elasticsearch
"""The client type, for stages that receive one without importing ``elasticsearch``."""
