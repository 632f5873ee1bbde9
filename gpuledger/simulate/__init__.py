"""The hybrid-cluster simulator behind ``gpuledger simulate``.

Library use::

    from gpuledger.simulate import SimConfig, simulate
    summary = simulate(SimConfig(seed=1, days=7), Path("sample_data"))
"""

from gpuledger.simulate.config import NodeCounts, SimConfig
from gpuledger.simulate.engine import SimSummary, simulate

__all__ = ["NodeCounts", "SimConfig", "SimSummary", "simulate"]
