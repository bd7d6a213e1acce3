"""``iolens train`` / ``iolens diagnose`` with peer groups across servers (``--groups`` as a list,
``--storage-map``) and the derived ``svctm`` metric, on the real recordings of
``tests/data/sysstat`` relabelled as two servers (``tests/jobs/test_peer_groups.py`` says how)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.jobs.peer_diagnosis import train
from pipeline.jobs.peer_groups import PeerGroups
from pipeline.jobs.peer_recording import load
from pipeline.reducers.peer_params import PeerParams
from tests.jobs.test_peer_groups import CLEAN, FAULT, LUNS, RENAME, two_servers

SEED = ["--downsample-s", "1", "--ma-width", "15", "--win-size", "60", "--win-shift", "30"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli")
    clean = two_servers(CLEAN, root / "clean")
    fault = two_servers(FAULT, root / "fault")
    lists = root / "groups.yaml"
    lists.write_text("ddn1:\n" + "".join(f"  - {lun}\n" for lun in LUNS))
    smap = root / "map.csv"
    smap.write_text("host,device,array\n" + "".join(f"{h},{d},ddn1\n" for h, d in RENAME.values()))
    return {
        "root": root,
        "groups": lists,
        "map": smap,
        **{f"clean{i}": p for i, p in enumerate(clean)},
        **{f"fault{i}": p for i, p in enumerate(fault)},
    }


def test_train_with_a_group_list_and_diagnose_with_a_storage_map_on_svctm(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    thr = files["root"] / "thr.json"
    clean = [str(files["clean0"]), str(files["clean1"])]
    args = ["train", "--groups", str(files["groups"]), "--metric", "svctm", "-o", str(thr)]
    assert main([*args, *SEED, *clean]) == 0
    want = train(
        load([files["clean0"], files["clean1"]], 1.0),
        ["svctm"],
        PeerGroups({lun: "ddn1" for lun in LUNS}),
        PeerParams(15, 60, 30, 3, 1000),
    )
    (entry,) = want.entries
    assert capsys.readouterr().out.splitlines()[0] == (
        f"ddn1\tsvctm\tthreshold {entry.threshold:g}\t({entry.windows} windows)"
    )
    assert entry.windows == 10

    fault = [str(files["fault0"]), str(files["fault1"])]
    args = ["diagnose", "--storage-map", str(files["map"]), "--thresholds", str(thr)]
    assert main([*args, "--metric", "svctm", "--json", *SEED, *fault]) == 0
    windows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(w["metric"], w["group"]) for w in windows} == {("svctm", "ddn1")}
    assert len(windows) == 16
    assert {f for w in windows for f in w["faulty"]} == {"ddn1:fs2/dm-0"}


def test_a_lun_listed_in_two_groups_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    groups = tmp_path / "groups.yaml"
    groups.write_text("a: [fs1:dm-0, fs1:dm-1]\nb: [fs1:dm-0]\n")
    assert main(["train", "--groups", str(groups), "-o", str(tmp_path / "t"), str(CLEAN)]) == 2
    err = capsys.readouterr().err.rstrip()
    refusal = "peer.members: fs1:dm-0 is in groups a and b: keep one"
    assert err.endswith(f"ERROR iolens: --groups {groups}: {refusal}")
