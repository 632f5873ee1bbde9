"""The planted world: an idle Slurm job and an idle pod still running get exactly one first
warning after 60 min and one second warning after 105 min; the decoys (a busy GPU, a GPU idle
for only 50 min, a gap in samples, a GPU without samples, an ended job) get none; a repeated
tick sends nothing new."""

from decimal import Decimal
from pathlib import Path

from gpuledger.alerts.run import run_alerts
from tests.alerts.helpers_ticks import Recorder, log_rows, world_site
from tests.alerts.helpers_world import IDLE_FROM, at

PLANTED = ["job 5001 (train-5001)", "pod research/train-0"]


def test_nothing_before_the_first_warning(tmp_path: Path) -> None:
    site, sent = world_site(tmp_path), Recorder()
    report = run_alerts(site, at(59), deliver=sent)
    assert sent.sent == []
    assert report.evaluation.findings == ()
    assert any("job 5005" in w and "no GPU samples" in w for w in report.warnings)


def test_one_first_warning_per_idle_allocation_then_nothing_new(tmp_path: Path) -> None:
    site, sent = world_site(tmp_path), Recorder()
    run_alerts(site, at(61), deliver=sent)
    assert sent.workloads() == [("idle_first", w) for w in PLANTED]
    by = {a.workload: (a, r) for a, r in sent.sent}
    job, to_alice = by[PLANTED[0]]
    assert job.node == "hpc-01"
    assert len(job.gpus) == 2
    assert job.idle_since == IDLE_FROM
    assert round(job.idle_minutes) == 61
    # 2 GPUs x 61 min at the rate card's a100/slurm 2.50 EUR per GPU-hour
    assert job.cost_so_far == (Decimal(2 * 61 * 60) / 3600 * Decimal("2.5")).quantize(
        Decimal("0.01"))
    assert job.currency == "EUR"
    assert job.person == "alice"
    assert to_alice.to == ("alice@example.org",)
    assert to_alice.cc == ("ops@example.org",)
    pod, to_team = by[PLANTED[1]]
    assert pod.person == "erin"
    assert to_team.to == ("ml-team@example.org",)
    assert job.link
    assert "/incidents?" in job.link
    assert "job=5001" in job.link
    again = Recorder()
    run_alerts(site, at(61), deliver=again)
    run_alerts(site, at(69), deliver=again)  # job 5003: 58 min, not yet
    assert again.sent == []
    rows = log_rows(site)
    assert [r["status"] for r in rows] == ["sent", "sent"]
    assert len({r["alert_key"] for r in rows}) == 2


def test_one_second_warning_after_105_minutes(tmp_path: Path) -> None:
    site = world_site(tmp_path)
    run_alerts(site, at(61), deliver=Recorder())
    second = Recorder()
    run_alerts(site, at(106), deliver=second)
    kinds = {w: k for k, w in second.workloads()}
    assert [w for w, k in kinds.items() if k == "idle_second"] == PLANTED
    # job 5003 has now been idle 95 min: its own first warning, the gap job (51 min) nothing
    assert kinds == {**dict.fromkeys(PLANTED, "idle_second"), "job 5003 (train-5003)":
                     "idle_first"}
    repeat = Recorder()
    run_alerts(site, at(106), deliver=repeat)
    assert repeat.sent == []


def test_a_first_look_after_105_minutes_sends_only_the_second(tmp_path: Path) -> None:
    site, sent = world_site(tmp_path), Recorder()
    run_alerts(site, at(110), deliver=sent)
    assert [k for k, w in sent.workloads() if w in PLANTED] == ["idle_second", "idle_second"]


def test_a_new_idle_streak_after_busy_is_a_new_incident(tmp_path: Path) -> None:
    from gpuledger.alerts.evaluate import Logged, due, evaluate
    from gpuledger.alerts.run import read_live
    site = world_site(tmp_path)
    samples, allocations, _ = read_live(site, at(61), site.alerts)
    findings = evaluate(samples, allocations, site.alerts, at(61)).findings
    earlier = [Logged("k", "idle", "idle_second", f.allocation.domain, f.allocation.cluster,
                      f.allocation.ident, f.allocation.node, f.idle_since, as_of)
               for f in findings for as_of in [IDLE_FROM.replace(minute=0)]]
    # the log's entries predate the streak: the GPUs were busy since, so it is new
    assert len(due(findings, earlier)) == 2
    during = [Logged("k", "idle", "idle_first", f.allocation.domain, f.allocation.cluster,
                     f.allocation.ident, f.allocation.node, f.idle_since, at(61))
              for f in findings]
    assert due(findings, during) == []
