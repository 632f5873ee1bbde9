"""``gpuledger doctor``: check a site file end to end and say what to fix (``run.py``); the
checks of each source beside it, on the results of ``checks.py``."""
