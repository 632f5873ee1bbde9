"""The pure rules of evaluate.py on hand-made samples: a streak is the unbroken run of idle
samples ending with the newest; a missed scrape ends it; "idle" is busy fraction <= threshold;
samples after as_of or before the allocation started do not count."""

from datetime import datetime, timedelta

import polars as pl

from gpuledger.alerts.evaluate import SAMPLE_COLUMNS, HeldAllocation, evaluate
from gpuledger.site.alerts import AlertsSite

T = datetime(2026, 1, 12, 8, 0)
JOB = HeldAllocation(domain="slurm", cluster="c", ident="7", node="n1", gpus=1, started=T,
                     job_id="7")


def _samples(values: list[float | None], *, job: str = "7", step: int = 60) -> pl.DataFrame:
    """One GPU, a sample every `step` s from T; None: no sample (a missed scrape)."""
    rows = [{"cluster": "c", "ts": T + timedelta(seconds=i * step), "node": "n1",
             "gpu_uuid": "GPU-1", "gpu_instance": None, "gpu_index": 0, "busy": v,
             "namespace": None, "pod": None, "pod_uid": None, "hpc_job": job}
            for i, v in enumerate(values) if v is not None]
    return pl.DataFrame(rows, schema=SAMPLE_COLUMNS)


DEFAULTS = AlertsSite()


def _minutes(frame: pl.DataFrame, as_of: datetime, policy: AlertsSite = DEFAULTS) -> list:
    found = evaluate(frame, [JOB], policy, as_of).findings
    return [(f.level, round(f.idle_minutes)) for f in found]


def test_sixty_idle_minutes_make_a_first_warning() -> None:
    frame = _samples([0.9] * 10 + [0.0] * 61)  # idle from minute 10 to minute 70
    assert _minutes(frame, T + timedelta(minutes=70)) == [("idle_first", 60)]
    assert _minutes(frame, T + timedelta(minutes=69)) == []  # samples after as_of ignored


def test_a_missed_scrape_ends_the_streak() -> None:
    frame = _samples([0.0] * 30 + [None] + [0.0] * 40)
    assert _minutes(frame, T + timedelta(minutes=70)) == []
    whole = _samples([0.0] * 71)
    assert _minutes(whole, T + timedelta(minutes=70)) == [("idle_first", 70)]


def test_one_busy_sample_ends_the_streak() -> None:
    frame = _samples([0.0] * 30 + [0.01] + [0.0] * 40)
    assert _minutes(frame, T + timedelta(minutes=70)) == []
    lenient = AlertsSite(idle_threshold=0.05)  # busy fraction <= 0.05 counts as idle
    assert _minutes(frame, T + timedelta(minutes=70), lenient) == [("idle_first", 70)]


def test_other_holders_and_samples_before_the_start_are_not_the_job_s() -> None:
    other = _samples([0.0] * 71, job="8")
    assert _minutes(other, T + timedelta(minutes=70)) == []
    late = HeldAllocation(domain="slurm", cluster="c", ident="7", node="n1", gpus=1,
                          started=T + timedelta(minutes=30), job_id="7")
    found = evaluate(_samples([0.0] * 71), [late], AlertsSite(), T + timedelta(minutes=70))
    assert found.findings == ()  # 40 min since its start


def test_second_warning_and_a_stale_gpu() -> None:
    frame = _samples([0.0] * 106)
    assert _minutes(frame, T + timedelta(minutes=105)) == [("idle_second", 105)]
    stale = evaluate(frame, [JOB], AlertsSite(), T + timedelta(minutes=110))
    assert stale.findings == ()
    assert any("stale source" in w for w in stale.warnings)
