"""sysstat disk activity: ``sadf -d`` CSV (tailed), ``sadf -j`` JSON and sadc binary files (read
whole, sadc through the host's ``sadf``) -> ``metrics-sysstat.diskio`` documents per host x device x
interval."""
