"""``iolens demo``: every stream of iolens on real data, in one run of the main job.

:mod:`pipeline.demo.data` lays out drop directories of every type from the data bundled with
the repository and with the ``darshan`` wheel; :mod:`pipeline.demo.findings` reads back from the
cluster what a storage engineer looks at first (the latency percentiles, the indicted LUN, the
slowest job's diagnosis, the workload model) and :mod:`pipeline.demo.show` prints it.
"""
