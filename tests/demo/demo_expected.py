"""What the demo indexes, shared by the checkout and the installed-package tests."""

EXPECTED = {
    "metrics-fio.latency": 381,
    "metrics-fio.histogram": 5020,
    "metrics-sysstat.diskio": 2520,
    "metrics-iolens.peer_anomaly": 234,
    "metrics-iolens.persistence": 5,
    "logs-darshan.job": 89,
    "logs-iolens.io_diagnosis": 89,
    "logs-slurm.job": 97,
    "logs-iolens.request": 300,
    "metrics-iolens.workload_model": 6,
    "logs-iolens.incident": 1,
}
"""Documents per data stream after the demo, counted from the bundled data: every record of the
fio logs (84 of the lab, 4 of the two-host run), 420 one-second samples x 6 LUNs of the lab's
sysstat, 39 peer windows x 6 LUNs, a ranking per minute of the slowed LUN, 86 lab jobs and
pydarshan's 3 (each diagnosed), their 86 + 11 Slurm rows, 300 requests in 6 clusters, and the
one incident."""
