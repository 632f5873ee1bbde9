"""The suite's real services for the site tests: the REAL Slurm of tests/slurm_real/conftest.py
and the REAL Prometheus of tests/prometheus_real/conftest.py (the same fixtures, imported)."""

from tests.prometheus_real.conftest import prometheus_tools, real_prometheus  # noqa: F401
from tests.slurm_real.conftest import real_slurm  # noqa: F401
