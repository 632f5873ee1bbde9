"""Slurm ingest: sacct (live or a dump), sreport and scontrol snapshots, merged into the ledger."""
