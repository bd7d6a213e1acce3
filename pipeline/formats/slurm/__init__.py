"""Slurm ``sacct --parsable2`` exports (tailed) -> ``logs-slurm.job`` documents, one per job or
step."""
