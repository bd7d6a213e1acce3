"""fio histogram logs (``write_hist_log``: ``*_clat_hist.<job>.log[.<host>][.gz]``) ->
``metrics-fio.histogram`` documents, one per log record, with percentiles and the non-empty bins."""
