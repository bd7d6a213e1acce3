"""Where the demo puts things, and its configuration.

Three cases, in this order:

* ``iolens demo --dir DIR``: everything under ``DIR`` (``drops/``, ``report.html``, the state in
  ``state/``, the embedded server's data in ``noida-db/``), and the demo's configuration written
  to ``DIR/iolens.yaml`` for the commands that follow (``--config`` or ``IOLENS_CONFIG``);
* in a checkout (the current directory holds ``config/pipeline.yaml``): drops and report under
  ``var/demo``, the state directory and embedded server of ``config/pipeline.yaml``, so the
  everyday commands there show the demo's data with no flags (nothing written beside it);
* anywhere else (an installed package): drops, report, server data and ``iolens.yaml`` under the
  user's data directory (``$XDG_DATA_HOME/iolens/demo``, by default
  ``~/.local/share/iolens/demo``), the state under the user's state directory
  (``$XDG_STATE_HOME/iolens/demo``), as platformdirs names them for the platform.

The configuration itself is the packaged ``config/demo.yaml`` with these paths filled in.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import platformdirs
import yaml

from pipeline.assets import required
from pipeline.errors import ConfigError
from pipeline.records.json import JsonObject
from pipeline.settings import DEFAULT_CONFIG, Settings, load_settings, settings_from_mapping
from pipeline.sink.disk import write_atomically


@dataclass(frozen=True)
class DemoLayout:
    """Where one demo puts things.

    Attributes:
        root: the demo's directory: ``drops/`` under it, the report beside.
        state_dir: the registry, spool and dead letters.
        server_dir: the embedded server's data (``embedded.data_dir``).
        config: where the demo's configuration is written for later commands; ``None`` in a
            checkout, whose ``config/pipeline.yaml`` already names the same state and server.
    """

    root: Path
    state_dir: Path
    server_dir: Path
    config: Path | None

    @property
    def drops(self) -> Path:
        """The parent of the demo's drop directories."""
        return self.root / "drops"

    @property
    def report(self) -> Path:
        """The HTML report's default path."""
        return self.root / "report.html"


def choose_layout(directory: Path | None, cwd: Path) -> DemoLayout:
    """The layout for ``--dir directory`` (``None``: not given) run from ``cwd``.

    Raises:
        ConfigError: the checkout's ``config/pipeline.yaml`` is not a valid configuration.
    """
    if directory is not None:
        d = (cwd / directory).resolve()  # its configuration then works from any directory
        return DemoLayout(d, d / "state", d / "noida-db", d / "iolens.yaml")
    if (cwd / DEFAULT_CONFIG).is_file():  # a checkout: share its state and server
        checkout = load_settings(cwd / DEFAULT_CONFIG)
        return DemoLayout(
            Path("var/demo"), Path(checkout.state_dir), Path(checkout.embedded.data_dir), None
        )
    data = Path(platformdirs.user_data_dir("iolens")) / "demo"
    state = Path(platformdirs.user_state_dir("iolens")) / "demo"
    return DemoLayout(data, state, data / "noida-db", data / "iolens.yaml")


def demo_config(layout: DemoLayout) -> JsonObject:
    """The packaged ``config/demo.yaml`` with the layout's paths filled in."""
    data = yaml.safe_load(required("config", "demo.yaml").read_text(encoding="utf-8"))
    data["state_dir"] = str(layout.state_dir)
    data["embedded"] = {**data.get("embedded", {}), "data_dir": str(layout.server_dir)}
    data["drops"] = [{**d, "path": str(layout.drops / d["path"])} for d in data["drops"]]
    return dict(data)


def demo_settings(layout: DemoLayout, es_url: str | None) -> Settings:
    """The demo's settings; written to ``layout.config`` when it has one.

    Args:
        layout: where things go.
        es_url: ``--es-url`` (the environment's ``IOLENS_ES_*`` apply as for every command).

    Raises:
        ConfigError: the packaged configuration is not valid (a broken installation).
        OSError: the configuration cannot be written.
    """
    data = demo_config(layout)
    settings = settings_from_mapping(data, source="demo configuration")
    if es_url:
        es = settings.elasticsearch.model_copy(update={"url": es_url})
        settings = settings.model_copy(update={"elasticsearch": es})
    if layout.config is not None:
        # the cluster it used (--es-url or IOLENS_ES_URL), never a credential
        write_config(layout.config, {**data, "elasticsearch": {"url": settings.elasticsearch.url}})
    return settings


def write_config(path: Path, data: JsonObject) -> None:
    """``data`` as the YAML file ``path`` (replaced atomically), with a header saying what it is."""
    quoted = shlex.quote(str(path))
    header = [
        "# written by `iolens demo`: the demo's drops, state and embedded server. Use it with",
        f"#   export IOLENS_CONFIG={quoted}   (or iolens --config {quoted} COMMAND)",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, [*header, yaml.safe_dump(dict(data), sort_keys=False).rstrip("\n")])


def refuse_config(config: str | None) -> None:
    """The demo makes its own configuration: ``--config`` is refused, not ignored.

    Raises:
        ConfigError: ``config`` was given.
    """
    if config is not None:
        raise ConfigError(
            f"--config {config}: the demo makes its own configuration; choose where it goes "
            "with iolens demo --dir DIR"
        )
