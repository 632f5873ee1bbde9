"""GPU busy levels per holder, as a stateless function of (profile, GPU, time).

Values are in thousandths (0..1000) of ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``. Only the planted idle
holders, warm-ups and gang waits go below 5 % (50); every other profile stays at or above 10 %,
so no unplanned ``idle_allocation`` can appear.
"""

import math

from simulator.records import Profile
from simulator.rng import mix

IDLE_THRESHOLD = 50  # < 5 % busy counts as idle
_BLOCK = 600  # noise changes every 10 minutes, like real training phases


def _noise(profile: Profile, gpu: int, ts: int, span: int) -> int:
    return mix(profile.seed, gpu, ts // _BLOCK) % span


def _infer_level(ts: int) -> int:
    hour = (ts % 86_400) / 3600
    return int(150 + 450 * (0.5 + 0.5 * math.sin(2 * math.pi * (hour - 9) / 24)))


def busy_milli(profile: Profile, gpu: int, ts: int) -> int:
    kind = profile.kind
    if kind == "train":
        return 600 + _noise(profile, gpu, ts, 380)
    if kind == "hpc":
        return 450 + _noise(profile, gpu, ts, 520)
    if kind == "io":
        return 150 + _noise(profile, gpu, ts, 300)
    if kind == "infer":
        return min(1000, _infer_level(ts) + _noise(profile, gpu, ts, 120))
    if kind == "idle":
        return _noise(profile, gpu, ts, 30)
    if kind == "warmup":
        if profile.busy_from is not None and ts < profile.busy_from:
            return 5 + _noise(profile, gpu, ts, 30)
        return min(1000, _infer_level(ts) + _noise(profile, gpu, ts, 120))
    if kind == "gang_wait":
        if profile.busy_from is None or ts < profile.busy_from:
            return _noise(profile, gpu, ts, 20)
        return 600 + _noise(profile, gpu, ts, 380)
    msg = f"expected a utilization profile kind, found {kind!r}"
    raise ValueError(msg)


def gpu_util_percent(milli: int) -> int:
    """``DCGM_FI_DEV_GPU_UTIL`` (0..100) reads a little higher than the engine-active ratio."""
    return min(100, (milli * 21 // 20 + 5) // 10)
