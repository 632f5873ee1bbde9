"""The hybrid-cluster simulator: a development tool that writes a simulated world with ground
truth (``python -m simulator --seed 1 --days 7 --out DIR``). No production module imports it.

Library use::

    from simulator import SimConfig, simulate
    summary = simulate(SimConfig(seed=1, days=7), Path("sample_data"))
"""

from simulator.config import NodeCounts, SimConfig
from simulator.engine import SimSummary, simulate

__all__ = ["NodeCounts", "SimConfig", "SimSummary", "simulate"]
