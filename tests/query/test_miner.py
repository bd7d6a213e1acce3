"""IOMiner.load against the embedded server: tables, columns, periods, selections, paging with
and without a point in time, missing streams, io_diagnosis documents."""

from __future__ import annotations

import datetime as dt
import logging
import math
from typing import Any, cast

import pandas as pd
import pytest
from elasticsearch import ApiError, Elasticsearch

from pipeline.query import ColumnError, IOMiner, to_timestamp
from pipeline.query.tables import TABLES, flatten, table
from pipeline.settings import settings_from_mapping
from pipeline.sink.capabilities import detect
from pipeline.sink.templates import install, load_templates


class Recorder:
    """A client that records the calls the miner makes; ``no_pit`` makes opening a point in
    time fail the way a cluster without the API does (a request to an endpoint it lacks)."""

    def __init__(self, client: Elasticsearch, *, no_pit: bool = False) -> None:
        self.client = client
        self.no_pit = no_pit
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def open_point_in_time(self, **kw: Any) -> Any:
        self.calls.append(("open_point_in_time", kw))
        if self.no_pit:
            return self.client.perform_request(
                "POST", f"/{kw['index']}/_no_such_api", headers={"accept": "application/json"}
            )
        return self.client.open_point_in_time(**kw)

    def close_point_in_time(self, **kw: Any) -> Any:
        self.calls.append(("close_point_in_time", kw))
        return self.client.close_point_in_time(**kw)

    def search(self, **kw: Any) -> Any:
        self.calls.append(("search", kw))
        return self.client.search(**kw)

    def field_caps(self, **kw: Any) -> Any:
        return self.client.field_caps(**kw)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@pytest.fixture
def miner(es_client: Elasticsearch, iominer_ns: str, iominer_period: tuple[str, str]) -> IOMiner:
    m = IOMiner(es_client, iominer_ns)
    m.init_stores(*iominer_period)
    return m


def test_tables_load_as_contract_columns(miner: IOMiner) -> None:
    counts = {name: len(miner.load(name)) for name in ("darshan job", "darshan file", "slurm")}
    assert counts == {"darshan job": 5, "darshan file": 12, "slurm": 8}
    jobs = miner.load("darshan job")
    assert jobs.table == "darshan_job"
    assert jobs.columns[:3] == ("timestamp", "job_id", "uid")
    assert jobs.columns[-4:] == ("partial", "log_id", "log_name", "log_version")
    assert jobs.df["job_id"].tolist() == ["1001", "1002", "1003", "1004", "1005"]
    assert not [c for c in jobs.columns if c.split("_")[0] in ("data", "event", "ecs", "agent")]
    for col in ("timestamp", "start", "end"):
        assert str(jobs.df[col].dtype).endswith(", UTC]"), col
    first = next(iter(jobs))
    assert first["timestamp"] == pd.Timestamp("2024-03-05T08:00:00Z")
    assert first["end"] == pd.Timestamp("2024-03-05T08:10:00Z")
    assert first["interfaces"] == ["POSIX", "STDIO"]
    assert (first["log_id"], first["log_name"]) == ("L1001", "bob_postproc_id1001.darshan")
    assert math.isnan(first["partial"])  # no document carries it
    files = miner.load("darshan file")
    assert files.df["osts"].tolist()[:3] == [[3], [4], [0, 1, 2, 3]]
    assert files.df["record_id"].tolist()[0] == "15394619944726450548"  # a uint64 as text
    slurm = miner.load("slurm")
    assert slurm.columns == TABLES["slurm"].columns
    assert slurm.df["slurm_id"].tolist()[2:5] == ["1003", "1003.batch", "1003.0"]
    assert slurm.df["step"].isna().tolist()[2:5] == [True, False, False]
    lmt = miner.load("lmt")
    assert lmt.columns == TABLES["lmt"].columns
    assert lmt.df[["ost_name", "ost_index"]].drop_duplicates().values.tolist() == [
        ["scratch-OST0005", 5],
        ["scratch-OST0007", 7],
        ["scratch-OST0009", 9],
    ]


def test_period_is_half_open_and_optional(es_client: Elasticsearch, iominer_ns: str) -> None:
    m = IOMiner(es_client, iominer_ns)
    assert m.time_range is None
    assert len(m.load("darshan job")) == 6  # all time: job 1006 of the evening before too
    assert len(m.load("darshan file")) == 20
    m.init_stores("2024-03-05T08:00:00Z", dt.datetime(2024, 3, 5, 10))
    assert m.load("darshan job").df["job_id"].tolist() == ["1001", "1002"]
    assert m.time_range == (
        pd.Timestamp("2024-03-05T08:00:00Z"),
        pd.Timestamp("2024-03-05T10:00:00Z"),
    )
    with pytest.raises(ValueError, match="is not after the start"):
        m.init_stores("2024-03-05", "2024-03-05")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (dt.datetime(2024, 3, 5, 1, 30), "2024-03-05T01:30:00Z"),  # naive: UTC
        (dt.datetime(2024, 3, 5, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=1))), "00:30"),
        (dt.date(2024, 3, 5), "2024-03-05T00:00:00Z"),
        ("2024-03-05", "2024-03-05T00:00:00Z"),
        ("2024-03-05T02:00:00+02:00", "2024-03-05T00:00:00Z"),
        (1709596800, "2024-03-05T00:00:00Z"),  # epoch seconds
        (1709596800.5, "2024-03-05T00:00:00.5Z"),
    ],
)
def test_to_timestamp(value: Any, expected: str) -> None:
    if len(expected) == 5:
        expected = f"2024-03-05T{expected}:00Z"
    assert to_timestamp(value) == pd.Timestamp(expected)
    assert str(to_timestamp(value).tz) == "UTC"


def test_to_timestamp_rejects() -> None:
    with pytest.raises(TypeError, match="a time must be"):
        to_timestamp(True)
    with pytest.raises(TypeError, match="a time must be"):
        to_timestamp(cast(Any, None))
    with pytest.raises(ValueError):
        to_timestamp("the fifth of March")


def test_table_names(miner: IOMiner) -> None:
    assert table("Darshan-Job") is table("darshan_job") is table("DARSHAN JOB")
    assert miner.index("darshan file") == "logs-darshan.file-iominer"
    assert miner.index("io diagnosis") == "logs-iolens.io_diagnosis-iominer"
    with pytest.raises(ValueError, match="unknown table 'darshan'; tables: darshan_job, "):
        miner.load("darshan")


def test_columns_are_read_alone(es_client: Elasticsearch, miner: IOMiner) -> None:
    rec = Recorder(es_client)
    m = IOMiner(cast(Elasticsearch, rec), miner.namespace)
    m.init_stores("2024-03-05", "2024-03-06")
    t = m.load("darshan job", columns=["job id", "Bytes Written", "timestamp", "log id"])
    assert t.columns == ("job_id", "bytes_written", "timestamp", "log_id")
    assert next(iter(t)) == {
        "job_id": "1001",
        "bytes_written": 500_000_000,
        "timestamp": pd.Timestamp("2024-03-05T08:00:00Z"),
        "log_id": "L1001",
    }
    searches = [kw for name, kw in rec.calls if name == "search"]
    assert [s["source_includes"] for s in searches] == [
        ["darshan.job.id", "darshan.job.bytes_written", "@timestamp", "darshan.log.id"]
    ]
    with pytest.raises(ColumnError) as info:
        m.load("darshan job", columns=["job id", "node count"])
    assert str(info.value).startswith(
        "unknown column 'node count' (table darshan_job); available: timestamp, job_id, uid,"
    )
    assert "collective_ratio" in info.value.available  # mapped by the template, no value here


def test_job_ids_and_query_select(miner: IOMiner) -> None:
    files = miner.load("darshan file", job_ids=["1003"])
    assert files.df["name"].tolist() == [
        "/scratch/cid/flash/run.log",
        "/scratch/cid/flash/input.nml",
        "/scratch/cid/flash/ckpt_0001.h5",
        "/scratch/cid/flash/stats.dat",
    ]
    assert miner.load("slurm", job_ids=[1003, 1005]).df["slurm_id"].tolist() == [
        "1003",
        "1003.batch",
        "1003.0",
        "1005",
    ]
    big = miner.load(
        "darshan file", query={"range": {"darshan.file.bytes_written": {"gte": 10_000_000_000}}}
    )
    assert big.df["name"].tolist() == [
        "/scratch/cid/flash/ckpt_0001.h5",
        "/scratch/dan/vpic/field_a.h5",
        "/scratch/dan/vpic/field_b.h5",
    ]
    none = miner.load("darshan job", job_ids=[])
    assert (len(none), none.columns) == (0, TABLES["darshan_job"].columns)
    with pytest.raises(ValueError, match="table lmt has no job id"):
        miner.load("lmt", job_ids=["1003"])


@pytest.mark.parametrize("pit", [None, False])
def test_a_missing_stream_is_an_empty_table(es_client: Elasticsearch, pit: bool | None) -> None:
    m = IOMiner(es_client, "nothinghere", pit=pit)
    for name, tbl in TABLES.items():
        t = m.load(name)
        assert (len(t), t.columns) == (0, tbl.columns)
        assert list(m.iter_frames(name)) == []
    assert m.load("slurm", columns=["job id", "node count"]).columns == ("job_id", "node_count")


def _keys(t: Any) -> list[tuple[Any, ...]]:
    return list(t.df[["timestamp", "ost_name"]].itertuples(index=False, name=None))


@pytest.mark.parametrize("pit", [None, True, False])
def test_paging_reads_every_row_once(
    es_client: Elasticsearch, iominer_ns: str, pit: bool | None
) -> None:
    whole = IOMiner(es_client, iominer_ns).load("lmt")
    paged = IOMiner(es_client, iominer_ns, page_size=5, pit=pit).load("lmt")
    # three OSTs share each timestamp: the sort must break those ties exactly
    assert len(paged) == len(whole) == 13
    assert sorted(_keys(paged)) == sorted(_keys(whole))
    assert len(set(_keys(paged))) == 13
    assert paged.df["timestamp"].is_monotonic_increasing


def test_iter_frames_pages(es_client: Elasticsearch, miner: IOMiner) -> None:
    m = IOMiner(es_client, miner.namespace, page_size=5)
    m.init_stores(*miner.time_range)  # type: ignore[misc]
    frames = list(m.iter_frames("lmt"))
    assert [len(f) for f in frames] == [5, 5, 2]
    assert all(f.columns.tolist() == list(TABLES["lmt"].columns) for f in frames)
    assert pd.concat(frames, ignore_index=True).equals(m.load("lmt").df)


def test_point_in_time_is_closed_even_when_reading_stops_early(
    es_client: Elasticsearch, iominer_ns: str
) -> None:
    rec = Recorder(es_client)
    m = IOMiner(cast(Elasticsearch, rec), iominer_ns, page_size=4, keep_alive="30s")
    assert len(m.load("lmt")) == 13
    assert rec.names() == ["open_point_in_time", *["search"] * 4, "close_point_in_time"]
    opened = rec.calls[0][1]
    assert (opened["index"], opened["keep_alive"]) == ("metrics-lmt.ost-iominer", "30s")
    first_search = rec.calls[1][1]
    assert "index" not in first_search
    assert first_search["sort"] == [{"@timestamp": "asc"}, {"_shard_doc": "asc"}]
    assert first_search["pit"]["keep_alive"] == "30s"
    rec.calls.clear()
    frames = m.iter_frames("lmt")
    assert len(next(frames)) == 4
    frames.close()
    assert rec.names() == ["open_point_in_time", "search", "close_point_in_time"]


def test_without_point_in_time_api_plain_search_after(
    es_client: Elasticsearch, iominer_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder(es_client, no_pit=True)
    m = IOMiner(cast(Elasticsearch, rec), iominer_ns, page_size=5)
    with caplog.at_level(logging.INFO, logger="pipeline.query.reader"):
        t = m.load("lmt")
    assert sorted(_keys(t)) == sorted(_keys(IOMiner(es_client, iominer_ns).load("lmt")))
    assert rec.names() == ["open_point_in_time", "search", "search", "search"]
    searches = [kw for name, kw in rec.calls if name == "search"]
    assert searches[0]["index"] == "metrics-lmt.ost-iominer"
    assert searches[0]["sort"] == [
        {"@timestamp": {"order": "asc"}},
        {"lmt.ost.fs": {"order": "asc", "unmapped_type": "keyword"}},
        {"lmt.ost.name": {"order": "asc", "unmapped_type": "keyword"}},
        {"_doc": {"order": "asc"}},
    ]
    assert searches[0]["search_after"] is None
    assert len(searches[1]["search_after"]) == 4  # the last hit's sort values: page two
    [msg] = [r.getMessage() for r in caplog.records]
    assert msg.startswith(
        "reading metrics-lmt.ost-iominer with plain search_after: no point-in-time API (HTTP 400:"
    )
    with pytest.raises(ApiError):
        IOMiner(cast(Elasticsearch, Recorder(es_client, no_pit=True)), iominer_ns, pit=True).load(
            "lmt"
        )


def test_from_settings(es_url: str, iominer_ns: str) -> None:
    settings = settings_from_mapping(
        {"elasticsearch": {"url": es_url, "namespace": iominer_ns}}, env={}
    )
    with IOMiner.from_settings(settings, page_size=3) as m:
        assert (m.namespace, m.page_size) == (iominer_ns, 3)
        assert len(m.load("slurm")) == 9


def test_invalid_options(es_client: Elasticsearch) -> None:
    with pytest.raises(ValueError, match="namespace must not be empty"):
        IOMiner(es_client, "")
    with pytest.raises(ValueError, match=r"page_size must be within 1\.\.10000, not 0"):
        IOMiner(es_client, page_size=0)


DIAGNOSIS = {
    "@timestamp": "2024-03-05T10:00:00.000Z",
    "data_stream": {"type": "logs", "dataset": "iolens.io_diagnosis", "namespace": "iominerdiag"},
    "event": {"dataset": "iolens.io_diagnosis", "module": "iolens", "kind": "event"},
    "darshan": {"job": {"id": "1003"}, "log": {"id": "L1003"}},
    "iolens": {
        "io_diagnosis": {
            "job_id": "1003",
            "log_id": "L1003",
            "exe": "flash4",
            "user": "cid",
            "nprocs": 1024,
            "low_bandwidth": True,
            "low_directions": ["write"],
            "direction": "write",
            "write_bytes_per_s": 4e8,
            "io_time_s": 50.0,
            "span_s": 50.0,
            "critical_files": [
                {"name": "/scratch/cid/flash/ckpt_0001.h5", "exclusive_s": 32.0, "osts": [7]},
                {"name": "/scratch/cid/flash/run.log", "exclusive_s": 12.0, "osts": [5]},
            ],
            "critical_file_count": 3,
            "factors": {"small": 1.0, "proc_per_ost": 657.04},
            "slow_osts": [],
        }
    },
}


def test_io_diagnosis_keeps_nested_lists(es_client: Elasticsearch) -> None:
    # the stream's templates first: a data stream created without them would hold dynamic
    # (text) mappings that later template installs on the same server cannot change
    install(es_client, load_templates(), detect(es_client))
    stream = "logs-iolens.io_diagnosis-iominerdiag"
    es_client.index(index=stream, id="d1003", document=DIAGNOSIS, op_type="create", refresh=True)
    t = IOMiner(es_client, "iominerdiag").load("io diagnosis", job_ids=["1003"])
    assert len(t) == 1
    row = next(iter(t))
    assert (row["job_id"], row["log_id"], row["direction"]) == ("1003", "L1003", "write")
    assert row["critical_files"] == DIAGNOSIS["iolens"]["io_diagnosis"]["critical_files"]  # type: ignore[index]
    assert (row["factors_small"], row["factors_proc_per_ost"]) == (1.0, 657.04)
    assert row["low_directions"] == ["write"]
    assert row["slow_osts"] == []
    assert row["timestamp"] == pd.Timestamp("2024-03-05T10:00:00Z")
    assert t.columns[: len(TABLES["io_diagnosis"].columns)] == TABLES["io_diagnosis"].columns
    assert len(IOMiner(es_client, "iominerdiag").load("io_diagnosis", job_ids=["1004"])) == 0


def test_flatten() -> None:
    src = {
        "@timestamp": "2024-03-05T10:00:00Z",
        "darshan.job.id": "7",
        "darshan": {"log": {"id": "L7"}, "file": {"name": "f", "osts": [1, 2]}},
        "data_stream": {"type": "logs"},
        "agent": {"name": "a"},
        "host": {"name": "n01"},
    }
    assert flatten(src, table("darshan file")) == {
        "timestamp": "2024-03-05T10:00:00Z",
        "job_id": "7",
        "log_id": "L7",
        "name": "f",
        "osts": [1, 2],
        "host_name": "n01",
    }
    assert flatten({"slurm": {"job": {"id": "7.0", "job_id": "7"}}}, table("slurm")) == {
        "slurm_id": "7.0",
        "job_id": "7",
    }
    assert flatten({"lmt": {"ost": {"name": "x-OST0001", "index": 1}}}, table("lmt")) == {
        "ost_name": "x-OST0001",
        "ost_index": 1,
    }
