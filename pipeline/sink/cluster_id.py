"""Which cluster this is: the identity the registry records with each file's delivery.

An Elasticsearch cluster names itself in ``GET /``::

    {"name": "node-1", "cluster_name": "prod", "cluster_uuid": "0sUaXJHTQ7Cw3tJ3mQ3sVg", ...}

``cluster_uuid`` is made when the cluster first forms and stays for its life; a new cluster (a
wiped or another one) gets another. It is ``"_na_"`` while no master has been elected.

The embedded noida-db server answers ``"cluster_uuid": "noida-local"`` whatever its data, so
every noida-db server would look like the same cluster. For it (and for a cluster that gives no
UUID) the identity is kept in the cluster itself instead: a document ``cluster`` in the index
``iolens-cluster`` holding a random UUID, created on first use with ``op_type: create``. It
lives and dies with the server's data directory, as a real cluster's UUID does; the server's URL
would not do, since a wiped data directory served again on the same port is a new cluster.
"""

from __future__ import annotations

import logging
import uuid

from elasticsearch import ApiError, ConflictError, Elasticsearch, NotFoundError, TransportError

log = logging.getLogger(__name__)

MARKER_INDEX = "iolens-cluster"
"""Index of the identity document, for clusters without a usable ``cluster_uuid``."""
MARKER_ID = "cluster"
"""``_id`` of the identity document."""
_NO_UUID = frozenset({"", "_na_"})


def cluster_id(client: Elasticsearch, *, create: bool = True) -> str | None:
    """The identity of the cluster ``client`` talks to.

    Args:
        client: the cluster's client.
        create: for a cluster without a usable ``cluster_uuid``, write the identity document
            when there is none yet (False: read only, as ``iolens status`` does).

    Returns:
        ``cluster_uuid`` from ``GET /``; for noida-db or a cluster without one, ``iolens:``
        followed by the 32 hex digits of the identity document; None when the cluster cannot
        be asked now, or (``create`` False) has no identity document yet.
    """
    try:
        info = client.info()
        found = str(info.get("cluster_uuid") or "")
        if info.get("name") != "noida-db" and found not in _NO_UUID:
            return found
        marker = _read_marker(client)
        if marker is None and create:
            marker = _create_marker(client)
    except (ApiError, TransportError) as err:
        log.debug("cannot tell which cluster this is: %s", err)
        return None
    return None if marker is None else f"iolens:{marker}"


def _read_marker(client: Elasticsearch) -> str | None:
    """The UUID in the identity document; None if there is none."""
    try:
        doc = client.get(index=MARKER_INDEX, id=MARKER_ID)
    except NotFoundError:
        return None
    return str(doc["_source"]["uuid"])


def _create_marker(client: Elasticsearch) -> str | None:
    """Write a new identity document; when another process wrote one first, that one wins."""
    new = uuid.uuid4().hex
    try:
        client.create(index=MARKER_INDEX, id=MARKER_ID, document={"uuid": new}, refresh=True)
    except ConflictError:
        return _read_marker(client)
    log.debug("this cluster is now known as iolens:%s", new)
    return new
