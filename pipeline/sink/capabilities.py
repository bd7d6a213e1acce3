"""What the connected cluster supports, probed once so that callers degrade instead of crashing.

DESIGN.md ("Embedded default"): the embedded noida-db server speaks an Elasticsearch 8.15 API
subset without ILM, data-stream admin and the ``percentiles`` aggregation. Each probe maps a
"no handler found" / "Unknown aggregation type" answer (any 4xx) to "unsupported" plus one
message saying what that means for the user.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from elasticsearch import ApiError, Elasticsearch, TransportError

from pipeline.errors import ConfigError

log = logging.getLogger(__name__)

PROBE_INDEX = "iolens-capability-probe"
"""Throw-away index created (and deleted) to ask whether ``percentiles`` parses."""


@dataclass(frozen=True)
class Capabilities:
    """What the cluster can do.

    Attributes:
        version: ``version.number`` from ``GET /`` (e.g. ``"8.15.3"``).
        ilm: index lifecycle management (``/_ilm``).
        data_stream_admin: the ``/_data_stream`` APIs (list, stats, rollover by name).
        percentiles_agg: the ``percentiles`` aggregation (else compute percentiles client-side
            from the stored histograms / pNN fields).
        messages: one sentence per missing capability, for the user.
    """

    version: str
    ilm: bool
    data_stream_admin: bool
    percentiles_agg: bool
    messages: tuple[str, ...] = ()


def _why(err: ApiError) -> str:
    return f"HTTP {err.status_code}: {err.message}"


def _probe_api(call: Callable[[], object], probe: str, missing: str) -> tuple[bool, str | None]:
    """Whether ``call`` (an admin API's GET) is answered; on an API error it is missing: the
    error is logged at DEBUG as the ``probe``'s and ``missing`` says what that means."""
    try:
        call()
    except ApiError as err:
        log.debug("%s probe: %s", probe, _why(err))
        return False, missing
    return True, None


def _probe_ilm(client: Elasticsearch, flavour: str) -> tuple[bool, str | None]:
    return _probe_api(
        client.ilm.get_lifecycle,
        "ILM",
        f"ILM is not available on this cluster ({flavour}): index lifecycle is not "
        "managed; retention must be handled by hand",
    )


def _probe_data_streams(client: Elasticsearch, flavour: str) -> tuple[bool, str | None]:
    return _probe_api(
        client.indices.get_data_stream,
        "data stream",
        f"the data-stream admin API (/_data_stream) is not available on this cluster "
        f"({flavour}): data streams are still created from the index templates, but cannot "
        "be listed or rolled over by name",
    )


def _probe_percentiles(client: Elasticsearch, flavour: str) -> tuple[bool, str | None]:
    created = False
    try:
        created, failure = _create_probe_index(client)
        if failure:
            return True, failure
        client.search(
            index=PROBE_INDEX,
            size=0,
            aggs={"p": {"percentiles": {"field": "probe_value", "percents": [50.0]}}},
        )
    except ApiError as err:
        return _percentiles_refused(err, flavour)
    finally:
        if created:
            try:
                client.indices.delete(index=PROBE_INDEX)
            except ApiError as err:
                log.warning("could not delete probe index %s: %s", PROBE_INDEX, _why(err))
    return True, None


def _create_probe_index(client: Elasticsearch) -> tuple[bool, str | None]:
    """Create the throw-away probe index: (whether this call created it, why the probe cannot
    go on or None; an index left by an earlier probe is used as it is)."""
    try:
        client.indices.create(index=PROBE_INDEX)
    except ApiError as err:
        if err.status_code != 400 or "already_exists" not in str(err.message):
            log.debug("percentiles probe: cannot create %s: %s", PROBE_INDEX, _why(err))
            return False, (
                f"could not check for the percentiles aggregation ({_why(err)}); "
                "assuming it is available"
            )
        return False, None
    return True, None


def _percentiles_refused(err: ApiError, flavour: str) -> tuple[bool, str]:
    """The verdict of a probe search that failed with ``err``: a 400 naming ``percentiles``
    means the aggregation is missing; anything else leaves it assumed available."""
    log.debug("percentiles probe: %s", _why(err))
    if err.status_code == 400 and "percentiles" in str(err.message).lower() + str(err.body):
        return False, (
            f"the percentiles aggregation is not available on this cluster ({flavour}): "
            "iolens computes percentiles from the stored histograms instead"
        )
    return True, f"could not check for the percentiles aggregation ({_why(err)})"


def detect(client: Elasticsearch) -> Capabilities:
    """Probe ``GET /``, ``GET /_ilm/policy``, ``GET /_data_stream`` and a ``size: 0`` search
    with a ``percentiles`` aggregation on a throw-away index (created and deleted again).

    Missing APIs never raise; each adds one message (logged here at DEBUG only: callers tell
    the user once per cluster with :func:`pipeline.sink.notices.announce`, or print them).

    Raises:
        ConfigError: the cluster does not answer ``GET /`` at all.
    """
    version, flavour = _version(client)
    messages: list[str] = []
    results = []
    for probe in (_probe_ilm, _probe_data_streams, _probe_percentiles):
        ok, msg = probe(client, flavour)
        results.append(ok)
        if msg:
            messages.append(msg)
            log.debug("%s", msg)
    return Capabilities(
        version=version,
        ilm=results[0],
        data_stream_admin=results[1],
        percentiles_agg=results[2],
        messages=tuple(messages),
    )


def licence_type(client: Elasticsearch) -> str | None:
    """The cluster's licence type from ``GET /_license``, lower case (``basic``, ``trial``,
    ``gold``...); None when it cannot be told (the API is missing or refused, the cluster does
    not answer, or the answer has no ``license.type``). Never raises.
    """
    try:
        return str(client.license.get()["license"]["type"]).lower()
    except (ApiError, TransportError, KeyError, TypeError):
        return None


def _version(client: Elasticsearch) -> tuple[str, str]:
    """The cluster's version number and what it is, for messages (``Elasticsearch 8.15.3``,
    ``noida-db 8.15 API subset``).

    Raises:
        ConfigError: the cluster does not answer ``GET /``.
    """
    try:
        info = client.info()
    except (ApiError, TransportError) as err:
        raise ConfigError(
            f"cannot read the cluster's version (GET /): {err}. Fix: check elasticsearch.url "
            "and the credentials"
        ) from None
    version = str(info.get("version", {}).get("number", "unknown"))
    flavour = (
        f"noida-db {'.'.join(version.split('.')[:2])} API subset"
        if info.get("name") == "noida-db"
        else f"Elasticsearch {version}"
    )
    return version, flavour
