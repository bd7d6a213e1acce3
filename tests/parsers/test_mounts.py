"""Mount tables: /proc/mounts rows, configured rows and the longest-prefix lookup."""

from pipeline.parsers.mounts import Mount, MountTable, configured_mounts, parse_proc_mounts

PROC = """\
/dev/vda1 / ext4 rw,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
/dev/loop3 /var/lib/iolens-lab/mnt/lun3 ext4 rw,relatime 0 0
/dev/loop4 /var/lib/iolens-lab/mnt/lun30 ext4 rw,relatime 0 0
/dev/mapper/vg-data /srv/data\\040store xfs rw 0 0
server:/export /home nfs4 rw,vers=4.2,addr=10.0.0.1 0 0
"""


def test_proc_mounts_rows() -> None:
    rows = parse_proc_mounts(PROC, "vm")
    assert rows == [
        Mount("/", "vm/vda1", "ext4"),
        Mount("/proc", None, "proc"),
        Mount("/var/lib/iolens-lab/mnt/lun3", "vm/loop3", "ext4"),
        Mount("/var/lib/iolens-lab/mnt/lun30", "vm/loop4", "ext4"),
        Mount("/srv/data store", "vm/vg-data", "xfs"),
        Mount("/home", None, "nfs4"),
    ]


def test_longest_whole_component_prefix_wins() -> None:
    table = MountTable(parse_proc_mounts(PROC, "vm"))
    assert table.lookup("/var/lib/iolens-lab/mnt/lun3/fio.dat") == Mount(
        "/var/lib/iolens-lab/mnt/lun3", "vm/loop3", "ext4"
    )
    assert table.lookup("/var/lib/iolens-lab/mnt/lun30/a").lun == "vm/loop4"  # type: ignore[union-attr]
    assert table.lookup("/var/lib/iolens-lab/mnt/lun3") is not None
    assert table.lookup("/srv/data store/x").lun == "vm/vg-data"  # type: ignore[union-attr]
    assert table.lookup("/home/u/f").lun is None  # type: ignore[union-attr]
    assert table.lookup("/tmp/x").lun == "vm/vda1"  # type: ignore[union-attr]
    assert table.lookup("relative/name") is None
    assert table.lookup("8a3f2c") is None  # an anonymized (hashed) Darshan name


def test_configured_rows_come_first() -> None:
    conf = configured_mounts(
        {"/var/lib/iolens-lab/mnt/lun3/": "oss1/sdc", "/scratch": "/dev/sdd"}, "vm"
    )
    assert conf == [
        Mount("/var/lib/iolens-lab/mnt/lun3", "oss1/sdc"),
        Mount("/scratch", "vm/sdd"),
    ]
    table = MountTable(conf, parse_proc_mounts(PROC, "vm"))
    assert table.lookup("/var/lib/iolens-lab/mnt/lun3/f").lun == "oss1/sdc"  # type: ignore[union-attr]
    assert table.lookup("/scratch/run/out.h5").lun == "vm/sdd"  # type: ignore[union-attr]
    assert len(table) == 7
    assert [m.mount_point for m in table.mounts()][:2] == ["/", "/home"]


def test_empty_table_knows_nothing() -> None:
    assert MountTable().lookup("/a/b") is None


def test_a_mount_on_top_of_another_hides_it() -> None:
    text = "/dev/sdb /data ext4 rw 0 0\n/dev/sdc /data xfs rw 0 0\n"
    assert MountTable(parse_proc_mounts(text, "vm")).lookup("/data/f") == Mount(
        "/data", "vm/sdc", "xfs"
    )
