"""GPU busy levels per holder, as a stateless function of (profile, GPU, time).

Values are in thousandths (0..1000) of ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``. Only the planted idle
holders, warm-ups and gang waits go below 5 % (50); every other profile stays at or above 10 %,
so no unplanned ``idle_allocation`` can appear. The ``--realistic`` kinds (``real_*``,
``inefficient``, ``low_steady``) go lower (long phases at 5-15 %, checkpoint pauses at 0-1 %,
warm-ups), but never below 5 % for as long as the idle rule's minimum (docs/detectors.md).
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
    if kind.startswith("real_") or kind in ("inefficient", "low_steady"):
        return _realistic(profile, gpu, ts)
    if kind == "gang_wait":
        if profile.busy_from is None or ts < profile.busy_from:
            return _noise(profile, gpu, ts, 20)
        return 600 + _noise(profile, gpu, ts, 380)
    msg = f"expected a utilization profile kind, found {kind!r}"
    raise ValueError(msg)


# --realistic (docs/simulator-shapes.md): phases relative to ``busy_from`` (the end of the
# warm-up, chosen by ``realistic.realistic_profile``), so every run below 5 % stays short
REALISTIC_LEVELS = {"real_train": (600, 380), "real_hpc": (450, 520), "real_io": (150, 300)}
LOW_PHASE = (55, 96)  # 5.5-15 %: data loading, evaluation; never below the idle threshold
PHASE = 3_600  # a phase (busy or low) lasts an hour
CHECKPOINT_FROM, CHECKPOINT_MAX = 120, 6 * 60  # pauses start 2 min into a 10-min block


def _realistic(profile: Profile, gpu: int, ts: int) -> int:
    busy_from = profile.busy_from if profile.busy_from is not None else ts
    if ts < busy_from:  # warm-up: loading data and compiling, 0-3 %
        return _noise(profile, gpu, ts, 30)
    if profile.kind == "inefficient":  # low busy share over the whole life
        return LOW_PHASE[0] + _noise(profile, gpu, ts, LOW_PHASE[1])
    if profile.kind == "low_steady":  # a decoy: 6-10 % for hours
        return 60 + _noise(profile, gpu, ts, 41)
    age = ts - busy_from
    block = age // _BLOCK
    # a checkpoint: 0-1 % for 1-6 minutes inside a 10-minute block, never at its edges, so
    # two pauses are always at least 4 minutes of work apart
    if block >= 1 and mix(profile.seed, block, 7) % 100 < 12:
        into = age % _BLOCK
        length = 60 * (1 + mix(profile.seed, block, 8) % (CHECKPOINT_MAX // 60))
        if CHECKPOINT_FROM <= into < CHECKPOINT_FROM + length:
            return mix(profile.seed, gpu, ts) % 11
    if mix(profile.seed, age // PHASE, 9) % 100 < 30:  # a long low phase
        return LOW_PHASE[0] + _noise(profile, gpu, ts, LOW_PHASE[1])
    base, span = REALISTIC_LEVELS[profile.kind]
    return base + _noise(profile, gpu, ts, span)


def gpu_util_percent(milli: int) -> int:
    """``DCGM_FI_DEV_GPU_UTIL`` (0..100) reads a little higher than the engine-active ratio."""
    return min(100, (milli * 21 // 20 + 5) // 10)
