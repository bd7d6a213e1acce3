"""``iolens service unit``: the systemd unit as printed, checked by ``systemd-analyze verify`` and
setting by setting.

``systemd-analyze verify`` works offline, without systemd as PID 1: it loads the unit file (and
the units it names, from the system's unit path), reports unknown keys and bad values as
warnings naming the file and line, and checks that ``ExecStart=``'s program exists and is
executable. It exits 0 after a mere warning, so the tests fail on any line of its output that
names the unit. It needs the Debian package ``systemd``: without it those tests are skipped,
and with ``IOLENS_REQUIRE_LAB=1`` (set by CI) they fail instead, so CI never passes by skipping
them.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pipeline.cli.main import build_parser, main
from pipeline.cli.service_cmd import (
    STOP_MARGIN_S,
    console_script,
    render_unit,
    stop_timeout_s,
    unit_word,
)
from pipeline.errors import ConfigError
from pipeline.settings import Settings

REQUIRE_ENV = "IOLENS_REQUIRE_LAB"
IOLENS = Path(sysconfig.get_path("scripts"), "iolens")
"""The console script of the iolens under test (this interpreter's scripts directory)."""

SECRET = "c2VjcmV0LWlkOnNlY3JldC1rZXk="


@pytest.fixture
def systemd_analyze() -> str:
    """The path of ``systemd-analyze``; without it the test is skipped, or fails where
    ``IOLENS_REQUIRE_LAB=1`` says this machine must run it (the lab's ``unavailable``)."""
    found = shutil.which("systemd-analyze")
    if found is None:
        why = "systemd-analyze is missing (Debian package systemd)"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{why} ({REQUIRE_ENV}=1: this machine must run the unit's tests)")
        pytest.skip(why)
    return found


def stop_timeout(unit: str) -> int:
    """The unit's ``TimeoutStopSec=``, in seconds (it is written ``<N>s``)."""
    (timeout,) = unit_settings(unit)["Service"]["TimeoutStopSec"]
    seconds = re.fullmatch(r"(\d+)s", timeout)
    assert seconds is not None, timeout
    return int(seconds.group(1))


def unit_settings(unit: str) -> dict[str, dict[str, list[str]]]:
    """Section -> key -> values (in order; a key may repeat) of a unit file's text."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in unit.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        assert not line.endswith("\\"), f"continued line: {raw}"
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep and current is not None, f"not a setting: {raw}"
        current.setdefault(key, []).append(value)
    return sections


def printed_unit(*args: str, env: dict[str, str] | None = None) -> str:
    """What the installed console script prints for ``service unit`` with ``args``."""
    assert IOLENS.is_file(), f"{IOLENS}: iolens is not installed in this environment"
    done = subprocess.run(
        [str(IOLENS), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    assert done.stderr == ""
    return done.stdout


def verify(analyze: str, unit_file: Path) -> tuple[int, list[str]]:
    """``systemd-analyze verify --man=no unit_file`` (``analyze``: its path): its exit status
    and the lines of its output that name the unit (its file or its name)."""
    env = {**os.environ, "SYSTEMD_LOG_LEVEL": "warning", "SYSTEMD_LOG_COLOR": "0"}
    done = subprocess.run(
        [analyze, "verify", "--man=no", str(unit_file)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    lines = (done.stdout + done.stderr).splitlines()
    return done.returncode, [line for line in lines if unit_file.name in line]


def write_unit(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "iolens.service"
    path.write_text(text, encoding="utf-8")
    return path


def test_systemd_analyze_verify_accepts_the_printed_unit(
    tmp_path: Path, systemd_analyze: str
) -> None:
    unit = write_unit(tmp_path, printed_unit("service", "unit"))
    assert verify(systemd_analyze, unit) == (0, [])


def test_verify_reports_what_the_test_must_catch(tmp_path: Path, systemd_analyze: str) -> None:
    text = printed_unit("service", "unit")
    with_bogus = text.replace("[Service]\n", "[Service]\nBogus=1\n")
    bogus_line = with_bogus.splitlines().index("Bogus=1") + 1
    unknown = write_unit(tmp_path / "unknown", with_bogus)
    status, lines = verify(systemd_analyze, unknown)
    assert status == 0  # a warning only: the lines are what fails the test above
    (line,) = lines  # the wording varies with the version of systemd
    assert line.startswith(f"{unknown}:{bogus_line}: Unknown key") and "'Bogus'" in line
    missing = write_unit(tmp_path / "missing", text.replace(str(IOLENS), "/nonexistent/iolens"))
    status, lines = verify(systemd_analyze, missing)
    assert status != 0
    (line,) = lines
    assert line.startswith("iolens.service: Command /nonexistent/iolens is not executable")


def test_the_unit_runs_this_installation_with_its_key_settings() -> None:
    units = unit_settings(printed_unit("service", "unit", env={"IOLENS_CONFIG": "/x.yaml"}))
    service = units["Service"]
    assert service["ExecStart"] == [
        f"{IOLENS} --config /etc/iolens/pipeline.yaml run --no-embedded "
        "--state-dir ${STATE_DIRECTORY}"
    ]
    expected = {
        "Type": "exec",
        "User": "iolens",
        "Group": "iolens",
        "StateDirectory": "iolens",
        "StateDirectoryMode": "0700",
        "ConfigurationDirectory": "iolens",
        "UMask": "0077",
        "EnvironmentFile": "-/etc/iolens/iolens.env",
        "KillSignal": "SIGTERM",
        "KillMode": "mixed",
        "SuccessExitStatus": "75",
        "Restart": "on-failure",
        "RestartSec": "30s",
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "read-only",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "ProtectKernelTunables": "yes",
        "ProtectKernelModules": "yes",
        "ProtectKernelLogs": "yes",
        "ProtectControlGroups": "yes",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "LockPersonality": "yes",
        "CapabilityBoundingSet": "",
    }
    assert {key: service[key] for key in expected} == {k: [v] for k, v in expected.items()}
    assert service["SystemCallFilter"] == ["@system-service", "~@privileged @resources"]
    # writable: the state directory only, through StateDirectory= (systemd.exec(5))
    assert not {"ReadWritePaths", "DynamicUser", "WorkingDirectory"} & set(service)
    assert units["Unit"]["After"] == ["network-online.target"]
    assert units["Install"] == {"WantedBy": ["multi-user.target"]}


def test_iolens_parses_the_command_line_of_the_unit() -> None:
    service = unit_settings(printed_unit("service", "unit"))["Service"]
    program, *argv = shlex.split(service["ExecStart"][0].replace("${STATE_DIRECTORY}", "/v/i"))
    assert program == str(IOLENS)
    args = build_parser("run").parse_args(argv)
    assert (args.command, args.config) == ("run", "/etc/iolens/pipeline.yaml")
    assert args.state_dir == "/v/i"
    assert not args.once and not args.keep_server
    assert args.no_embedded  # a service never stands in a development server for its cluster


def test_no_secret_reaches_the_unit() -> None:
    env = {"IOLENS_ES_API_KEY": SECRET, "IOLENS_ES_PASSWORD": SECRET, "IOLENS_ES_URL": "https://e"}
    unit = printed_unit("service", "unit", env=env)
    assert SECRET not in unit and "https://e" not in unit
    (exec_start,) = unit_settings(unit)["Service"]["ExecStart"]
    program, *argv = shlex.split(exec_start)  # the program's path may hold any word
    assert program == str(IOLENS)
    assert not re.search(r"(?i)key|password|user|IOLENS_ES|--es-url", " ".join(argv))
    assert "Environment" not in unit_settings(unit)["Service"]


def test_the_stop_timeout_is_the_drain_timeout_and_a_margin() -> None:
    drain_s = Settings().sink.drain_timeout_s  # iolens bounds its drain by it (run exits 75)
    unit = printed_unit("service", "unit")
    assert stop_timeout(unit) == stop_timeout_s(drain_s) == math.ceil(drain_s + STOP_MARGIN_S)
    assert STOP_MARGIN_S >= 30  # room to handle the signal and exit after the deadline
    # the comment says where the value comes from (a changed margin must change it too)
    comment = " ".join(ln[1:].strip() for ln in unit.splitlines() if ln.startswith("#"))
    assert "The drain lasts sink.drain_timeout_s at most: then iolens exits by itself" in comment
    assert f"The stop timeout is that plus {STOP_MARGIN_S:g} s, from the configuration" in comment


def test_a_configured_drain_timeout_sets_the_stop_timeout(tmp_path: Path) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text("sink:\n  drain_timeout_s: 300.5\n")
    unit = printed_unit("--config", str(config), "service", "unit")
    assert stop_timeout(unit) == 331  # 300.5 + 30, rounded up
    (exec_start,) = unit_settings(unit)["Service"]["ExecStart"]
    assert f"--config {config} run" in exec_start


def test_a_config_the_unit_cannot_read_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("sink:\n  drain_timeout_s: 0\n")
    assert main(["--config", str(bad), "service", "unit"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "sink.drain_timeout_s: Input should be greater than 0" in (
        captured.err
    )
    assert main(["--config", str(tmp_path / "none.yaml"), "service", "unit"]) == 2
    assert "none.yaml: configuration file not found" in capsys.readouterr().err


def test_user_config_and_a_path_with_spaces(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    systemd_analyze: str,
) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "p 1%.yaml").write_text("sink:\n  drain_timeout_s: 45\n")
    script = tmp_path / "my tools" / "bin" / "iolens"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sys, "argv", [str(script)])
    monkeypatch.chdir(tmp_path)
    assert main(["--config", "conf/p 1%.yaml", "service", "unit", "--user", "svc-io_1"]) == 0
    text = capsys.readouterr().out
    service = unit_settings(text)["Service"]
    assert service["User"] == service["Group"] == ["svc-io_1"]
    assert service["ExecStart"] == [
        f'"{script}" --config "{tmp_path}/conf/p 1%%.yaml" run --no-embedded '
        "--state-dir ${STATE_DIRECTORY}"
    ]
    assert stop_timeout(text) == 75  # 45 + 30
    assert verify(systemd_analyze, write_unit(tmp_path / "unit", text)) == (0, [])


@pytest.mark.parametrize("name", ["1iolens", "-x", "io lens", "a" * 32, "", "io$"])
def test_a_user_name_systemd_refuses_is_a_usage_error(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["service", "unit", f"--user={name}"])
    assert exc.value.code == 2
    assert "a user name is 1 to 31 letters" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("/opt/iolens/bin/iolens", "/opt/iolens/bin/iolens"),
        ("/opt/io lens/iolens", '"/opt/io lens/iolens"'),
        ("/a/50%/$HOME", "/a/50%%/$$HOME"),
        ('/a/"b"\\c', '"/a/\\"b\\"\\\\c"'),
        ("/a/it's", '"/a/it\'s"'),
    ],
)
def test_unit_word(word: str, quoted: str) -> None:
    assert unit_word(word) == quoted


def test_render_unit_refuses_a_relative_path() -> None:
    with pytest.raises(ValueError, match="bin/iolens: the unit needs an absolute path"):
        render_unit(
            "@IOLENS@", Path("bin/iolens"), Path("/etc/iolens/pipeline.yaml"), "iolens", 150
        )


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_console_script_prefers_the_running_command(tmp_path: Path) -> None:
    running = executable(tmp_path / "venv" / "bin" / "iolens")
    scripts = executable(tmp_path / "scripts" / "iolens")
    on_path = executable(tmp_path / "path" / "iolens")
    assert console_script(str(running), str(scripts.parent), str(on_path.parent)) == running
    other = str(tmp_path / "pytest")  # not the console script: this interpreter's scripts
    assert console_script(other, str(scripts.parent), str(on_path.parent)) == scripts
    assert console_script(other, str(tmp_path / "none"), str(on_path.parent)) == on_path
    on_path.chmod(0o644)  # not executable
    with pytest.raises(ConfigError, match="cannot find the iolens command"):
        console_script(other, str(tmp_path / "none"), str(on_path.parent))


def test_console_script_keeps_a_relative_invocation_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable(tmp_path / "bin" / "iolens")
    link = tmp_path / "link" / "iolens"
    link.parent.mkdir()
    link.symlink_to(tmp_path / "bin" / "iolens")  # e.g. pipx's ~/.local/bin/iolens
    monkeypatch.chdir(tmp_path)
    assert console_script("link/iolens", str(tmp_path / "none"), "") == link
