"""The action hook (off by default) runs the site's command once per incident after
``after_minutes``, never through a shell, logs its exit code and output, tells the owner; a dry
run logs it and runs nothing."""

import json
import sys
from pathlib import Path

import duckdb

from gpuledger.alerts.run import run_alerts
from tests.alerts.helpers_ticks import Recorder, world_site
from tests.alerts.helpers_world import at

SCRIPT = """import json, sys
from pathlib import Path
out = Path(sys.argv[1])
calls = json.loads(out.read_text()) if out.exists() else []
calls.append(sys.argv[2:])
out.write_text(json.dumps(calls))
print("cancelled", *sys.argv[2:])
"""


def _site(tmp_path: Path, *, enabled: bool = True):
    script = tmp_path / "act.py"
    script.write_text(SCRIPT)
    calls = tmp_path / "calls.json"
    table = f"""
[gpuledger.alerts.action]
enabled = {str(enabled).lower()}
after_minutes = 120
timeout_s = 20
slurm_command = ["{sys.executable}", "{script}", "{calls}", "scancel", "{{job_id}}"]
kubernetes_command = ["{sys.executable}", "{script}", "{calls}", "kubectl", "delete", "pod",
                      "-n", "{{namespace}}", "{{pod}}"]
"""
    return world_site(tmp_path / "world", table), calls


def _actions(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT allocation, status, exit_code, stdout_tail, dry_run "
                           "FROM alert_actions ORDER BY allocation").fetchall()
    finally:
        con.close()


def test_action_runs_once_and_the_owner_is_told(tmp_path: Path) -> None:
    site, calls = _site(tmp_path)
    first = Recorder()
    run_alerts(site, at(110), deliver=first)
    assert not calls.exists()  # not before 120 min
    job = next(a for a, _ in first.sent if a.workload == "job 5001 (train-5001)")
    assert job.next_step
    assert "cancelled at 120 min" in job.next_step
    acted = Recorder()
    run_alerts(site, at(121), deliver=acted)
    run_alerts(site, at(125), deliver=acted)
    ran = json.loads(calls.read_text())
    assert sorted(ran) == [["kubectl", "delete", "pod", "-n", "research", "train-0"],
                           ["scancel", "5001"]]
    told = {a.workload: a for a, _ in acted.sent if a.kind == "idle_action"}
    assert set(told) == {"job 5001 (train-5001)", "pod research/train-0"}
    assert "ran " in told["job 5001 (train-5001)"].action_taken
    rows = _actions(site.db)
    assert [(r[1], r[2], r[4]) for r in rows] == [("done", 0, False)] * 2
    assert "cancelled scancel 5001" in rows[0][3]


def test_dry_run_logs_the_action_and_runs_nothing(tmp_path: Path) -> None:
    site, calls = _site(tmp_path)
    run_alerts(site, at(121), dry_run=True, deliver=Recorder())
    run_alerts(site, at(122), dry_run=True, deliver=Recorder())
    assert not calls.exists()
    assert [(r[1], r[4]) for r in _actions(site.db)] == [("dry_run", True)] * 2


def test_action_off_by_default(tmp_path: Path) -> None:
    site, calls = _site(tmp_path, enabled=False)
    sent = Recorder()
    run_alerts(site, at(125), deliver=sent)
    assert not calls.exists()
    assert _actions(site.db) == []
    planted = {"job 5001 (train-5001)", "pod research/train-0"}
    assert [k for k, w in sent.workloads() if w in planted] == ["idle_second"] * 2
