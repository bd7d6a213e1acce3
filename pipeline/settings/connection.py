"""How iolens reaches Elasticsearch: the cluster's connection and the embedded server.

Secrets may come from files (``password_file``, ``api_key_file``) that only their owner can read
(:func:`read_secret`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from pipeline.settings.base import Frozen


class ElasticsearchSettings(Frozen):
    """How to reach the cluster."""

    url: str = Field("http://localhost:9200", description="Elasticsearch URL (IOLENS_ES_URL).")
    api_key: str | None = Field(
        None, repr=False, description="API key, base64 id:key (IOLENS_ES_API_KEY)."
    )
    username: str | None = Field(None, description="Basic-auth user (IOLENS_ES_USERNAME).")
    password: str | None = Field(
        None, repr=False, description="Basic-auth password (IOLENS_ES_PASSWORD)."
    )
    ca_certs: str | None = Field(None, description="CA certificate file (IOLENS_ES_CA_CERTS).")
    verify_certs: bool = Field(True, description="Verify the server's TLS certificate.")
    request_timeout_s: float = Field(30.0, gt=0, description="Per-request timeout in seconds.")
    namespace: str = Field(
        "default", description="Data stream namespace: {type}-{dataset}-{namespace}."
    )
    password_file: str | None = Field(
        None,
        description="File holding the password (IOLENS_ES_PASSWORD_FILE); it must not be "
        "readable by group or others (chmod 600).",
    )
    api_key_file: str | None = Field(
        None,
        description="File holding the API key (IOLENS_ES_API_KEY_FILE); it must not be "
        "readable by group or others.",
    )

    @model_validator(mode="before")
    @classmethod
    def _secrets_from_files(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        for key in ("password", "api_key"):
            path = out.get(f"{key}_file")
            if path and not out.get(key):
                out[key] = read_secret(str(path))
        return out

    @field_validator("namespace")
    @classmethod
    def _namespace_ok(cls, v: str) -> str:
        bad = set('-\\/*?"<>|,# ') | {c for c in v if c.isupper()}
        if not v or any(c in bad for c in v) or len(v) > 100:
            raise ValueError("must be lower case, at most 100 characters, without '-' or spaces")
        return v


class EmbeddedSettings(Frozen):
    """The embedded Elasticsearch-API development server (noida-db)."""

    enabled: bool = Field(
        True, description="Start it when nothing answers at a localhost elasticsearch.url."
    )
    data_dir: str = Field("var/noida-db", description="Where the embedded server keeps its data.")
    start_timeout_s: float = Field(20.0, gt=0, description="How long to wait for it to answer.")


def read_secret(path: str) -> str:
    """The secret in ``path`` (surrounding white space dropped).

    A file under ``$CREDENTIALS_DIRECTORY`` is a credential systemd passed with
    ``LoadCredential=`` (systemd.exec(5)): systemd owns its access (on a tmpfs it grants the
    service's user read through an ACL, so the mode shows group bits), and its mode is not
    checked.

    Raises:
        ValueError: the file is missing, unreadable, empty, or readable by group or others
            (the message names the file and its mode).
    """
    try:
        st = os.stat(path)
        if st.st_mode & 0o077 and not _systemd_credential(path):
            raise ValueError(
                f"{path} is readable by group or others (mode {st.st_mode & 0o777:04o}); "
                "chmod 600 it"
            )
        secret = Path(path).read_text(encoding="utf-8").strip()
    except OSError as err:
        raise ValueError(f"{path}: {err.strerror}") from None
    if not secret:
        raise ValueError(f"{path} is empty")
    return secret


def _systemd_credential(path: str) -> bool:
    """Whether ``path`` lies in the credentials directory systemd made for this service."""
    creds = os.environ.get("CREDENTIALS_DIRECTORY")
    if not creds:
        return False
    return Path(path).resolve().is_relative_to(Path(creds).resolve())
