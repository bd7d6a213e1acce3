"""The steps of one Darshan job's analysis (seed 004, IOMiner), in the order they run.

:func:`pipeline.reducers.darshan_job.analyze` chains them:

1. :mod:`.records` — gather each record's counters into columns (reference/darshan-iominer.md
   2.2);
2. :mod:`.times` — each record's busy interval, and the read and write time unions (2.3);
3. :mod:`.files` — group the records per file (POSIX and STDIO, MPI-IO counts joined);
4. :mod:`.rows` — one ``darshan.file`` row per file (seed 004 II-B, the file table);
5. :mod:`.critical` — the critical path, critical files and their exclusive times, and the
   five contributing factors weighted by exclusive time (seed 004 II-D);
6. :mod:`.summary` — the job row: first-order metrics, file-sharing pattern, interface and
   bandwidths (seed 004 II-B, III-C..E);
7. :mod:`.osts` — per-OST speed of the job's files, and the OSTs far slower than the rest.

Each step is a function of its inputs (numpy arrays and dicts), testable alone.
"""
