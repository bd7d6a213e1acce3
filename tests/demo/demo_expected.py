"""What the demo indexes, shared by the checkout and the installed-package tests."""

EXPECTED = {
    "metrics-fio.latency": 108,
    "metrics-fio.histogram": 315,
    "metrics-sysstat.diskio": 3780,
    "metrics-iolens.peer_anomaly": 96,
    "metrics-iolens.persistence": 14,
    "logs-darshan.job": 3,
    "logs-iolens.io_diagnosis": 1,
    "logs-slurm.job": 11,
    "logs-iolens.request": 300,
    "metrics-iolens.workload_model": 6,
}
"""Documents per data stream after the demo (each counted from the bundled data: 6 intervals x 3
directions x 6 scopes of fio, 540 samples x 7 devices of sysstat, 16 windows x 6 LUNs, ...)."""
