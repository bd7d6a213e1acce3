"""Application and kernel event logs (JSON lines, tailed) joined into requests by the drop's
event schema -> ``logs-iolens.request`` documents and ``iolens.workload_model`` snapshots."""
