"""LMT (Lustre Monitoring Tool) per-OST CSV exports (tailed, cumulative counters) ->
``metrics-lmt.ost`` documents, one per OST x interval."""
