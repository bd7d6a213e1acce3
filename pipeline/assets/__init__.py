"""What iolens reads at run time, shipped inside the package and found with importlib.resources.

Laid out under this package (a checkout links its top-level ``mappings/``, ``kibana/`` and
``config/`` here, so that an editable install and a wheel read the same files)::

    mappings/       index and component templates, the ILM policy (sink/templates.py)
    kibana/         saved objects, alert rules and watches (kibana.py, alerting/)
    config/         pipeline.yaml (the commented example configuration), demo.yaml,
                    schemas/pipeline.schema.json (its JSON Schema),
                    schemas/<name>.yaml (event schemas)
    demo/           the real recordings ``iolens demo`` lays out (demo/data.py)
    systemd/        iolens.service, the unit ``iolens service unit`` prints

A wheel is installed as files, so every resource is a real path; an installation that keeps
the package in a zip archive is refused with a message instead of read half.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from pipeline.errors import ConfigError


def asset(*parts: str) -> Path:
    """The path of a file or directory shipped with iolens, e.g. ``asset("mappings")``.

    Args:
        parts: path components under this package (``"config", "pipeline.yaml"``).

    Raises:
        ConfigError: the package is not installed as files (a zip archive).
    """
    root = files(__name__)
    if not isinstance(root, Path):
        raise ConfigError(
            f"iolens is installed as an archive ({root}); install it as files (pip install iolens)"
        )
    return root.joinpath(*parts)


def required(*parts: str) -> Path:
    """:func:`asset`, which must exist.

    Raises:
        ConfigError: it is missing (a broken installation: the message says how to mend it).
    """
    path = asset(*parts)
    if not path.exists():
        raise ConfigError(
            f"{path}: missing from the installed package; reinstall iolens "
            "(pip install --force-reinstall iolens)"
        )
    return path


def example_config() -> str:
    """The commented example configuration (every key with its default), as text."""
    return required("config", "pipeline.yaml").read_text(encoding="utf-8")


def event_schema(name: str) -> Path:
    """A bundled event schema by name (``http_server``: ``config/schemas/http_server.yaml``).

    Raises:
        ConfigError: no bundled schema of that name; the message lists those there are.
    """
    directory = required("config", "schemas")
    path = directory / f"{name}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in directory.glob("*.yaml"))
        raise ConfigError(f"no bundled event schema {name!r}; bundled: {', '.join(names)}")
    return path
