"""The ingest wing: read each source for a window and write it to the ledger (``kubernetes/``,
``slurm/``, reference files, the site's load)."""
