"""sysstat disk activity: ``sadf -d`` CSV and ``sadf -j`` JSON (tailed), sadc binary files (read
whole through the host's ``sadf``) -> ``metrics-sysstat.diskio`` documents per host x device x
interval."""
