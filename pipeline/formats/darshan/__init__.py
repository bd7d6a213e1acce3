"""Darshan job logs (binary ``*.darshan``, or ``darshan-parser`` text dumps) ->
``logs-darshan.job``, ``logs-darshan.file`` and ``logs-iolens.io_diagnosis`` documents."""
