"""Slurm accounting sources: sacct and sreport, as text, from a host or a dump file."""
