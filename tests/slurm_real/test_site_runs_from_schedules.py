"""A site file pointing at the suite's REAL Slurm (live sacct through a slow prefix) and REAL
Prometheus runs the daily ingest and the weekly close from the schedules, with no sample_data.

The RunRequests come from the schedule functions; each is executed by `dagster job execute` with
the multiprocess executor under a DAGSTER_HOME whose dagster.yaml is pipelines/dagster.yaml (the
gpuledger_ledger pool has one slot). The publish run comes from the run-status sensor. The
Slurm prefix sleeps 65 s before each command, so the steps that read Slurm are slow while the
others queue for the pool; every step must still succeed. Meanwhile a reader runs `gpuledger sql`
on the published snapshot over and over and must never fail.

Kubernetes data: a one-day simulated world's metrics for the day of the real jobs, backfilled
into the real Prometheus by tests/prometheus_real/conftest.py (promtool).
"""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from simulator import SimConfig, simulate
from simulator.config import NodeCounts
from tests.helpers import load_definitions

# here, beside the real_slurm fixture of this folder's conftest: one Slurm per session (a second
# copy of the fixture elsewhere would restart Slurm and wipe the first one's state)
from tests.prometheus_real.conftest import prometheus_tools, real_prometheus  # noqa: F401

pytestmark = [pytest.mark.slurm, pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[2]
SLOW_S = 65  # above the 60 s request timeouts of the site file; 120 s cost the suite 4 more minutes
RUN_TIMEOUT_S = 1800
MULTIPROCESS = "execution:\n  config:\n    multiprocess:\n      max_concurrent: 4\n"


def _epoch(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def sacct_gpu_seconds(real_slurm, day: date) -> int:
    """GPU-seconds of the day straight from sacct's own allocation lines (-X: no steps; every
    run of a requeued job): gres/gpu=N of AllocTRES times the part of Start..End in the day."""
    lo = datetime.combine(day, dtime(), UTC)
    hi = lo + timedelta(days=1)
    out = real_slurm.sacct(
        ["--allusers", "--duplicates", "-X", "-P", "-n",
         "--format=JobIDRaw,Start,End,AllocTRES", "-S", f"{lo:%Y-%m-%dT%H:%M:%S}",
         "-E", f"{hi:%Y-%m-%dT%H:%M:%S}"],
        env={"SLURM_TIME_FORMAT": "%s"})
    total = 0
    for line in out.splitlines():
        if not line.strip():
            continue
        _job, start, end, tres = line.split("|")
        gpus = sum(int(kv.split("=", 1)[1]) for kv in tres.split(",")
                   if kv.startswith("gres/gpu=") and kv.split("=", 1)[1].isdigit())
        s, e = _epoch(start), _epoch(end)
        if not gpus or s is None or e is None:
            continue
        total += gpus * max(0, min(e, int(hi.timestamp())) - max(s, int(lo.timestamp())))
    return total


def _write_site(tmp: Path, cluster: str, day: date, prometheus_url: str, prefix: Path) -> Path:
    folder = tmp / "site"
    folder.mkdir()
    site = folder / "gpuledger.toml"
    site.write_text(f"""# written by tests/slurm_real/test_site_runs_from_schedules.py
[gpuledger]
first_day = "{day - timedelta(days=day.weekday())}"
db = "{folder / 'data' / 'gpuledger.duckdb'}"
reports_dir = "{folder / 'reports'}"

[gpuledger.schedules]
enabled = true

[gpuledger.clusters.{cluster}.slurm]
mode = "sacct"
prefix = "{prefix}"
timeout_s = 600
lookback_hours = 24

[gpuledger.clusters.{cluster}.prometheus]
url = "{prometheus_url}"
timeout_s = 60
""", encoding="utf-8")
    return site


class Reader(threading.Thread):
    """`gpuledger sql` on the published snapshot, again and again, until stopped."""

    def __init__(self, db: Path, env: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.db, self.env = db, env
        self.stop = threading.Event()
        self.calls, self.failures = 0, []

    def run(self) -> None:
        cli = Path(sys.executable).with_name("gpuledger")
        while not self.stop.is_set():
            done = subprocess.run(
                [str(cli), "--db", str(self.db), "sql",
                 "SELECT count(*) AS n, coalesce(sum(gpu_seconds), 0) AS s FROM allocations"],
                env=self.env, capture_output=True, text=True, timeout=120, check=False)
            self.calls += 1
            if done.returncode != 0 or not done.stdout.startswith("n,s"):
                self.failures.append(done.stderr.strip() or done.stdout)
            time.sleep(0.5)


def _execute(env: dict[str, str], request: dg.RunRequest, job: str, tmp: Path) -> None:
    """`dagster job execute` of a RunRequest, multiprocess executor."""
    config = tmp / "multiprocess.yaml"
    config.write_text(MULTIPROCESS, encoding="utf-8")
    tags = dict(request.tags)
    if request.partition_key:
        tags["dagster/partition"] = request.partition_key
    dagster = Path(sys.executable).with_name("dagster")
    done = subprocess.run(
        [str(dagster), "job", "execute", "-m", "pipelines.definitions", "-a", "defs", "-j", job,
         "-c", str(config), "--tags", json.dumps(tags)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]


def _last_run(instance: dg.DagsterInstance, job: str) -> dg.DagsterRun:
    runs = instance.get_runs(filters=dg.RunsFilter(job_name=job), limit=1)
    assert runs, f"expected a run of {job}, found none"
    return runs[0]


def _publish_after(instance, defs, env, run, tmp: Path) -> None:
    """What the run-status sensor asks for after a successful run, executed."""
    sensor = defs.resolve_sensor_def("publish_after_ledger_runs")
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor.name, dagster_instance=instance, dagster_run=run,
        dagster_event=dg.DagsterEvent(event_type_value="PIPELINE_SUCCESS", job_name=run.job_name),
    )
    request = sensor(context)
    assert request.run_key == f"publish-after-{run.run_id}"
    _execute(env, request, "publish_ledger", tmp)


def _steps_all_succeeded(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dict[str, float]:
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.SUCCESS
    stats = instance.get_run_step_stats(run.run_id)
    assert stats
    failed = [s.step_key for s in stats if s.status.value != "SUCCESS"]
    assert failed == []
    return {s.step_key: (s.end_time or 0) - (s.start_time or 0) for s in stats}


def test_a_site_runs_daily_and_weekly_from_its_schedules(real_slurm, real_prometheus,  # noqa: F811
                                                         tmp_path: Path):
    day = real_slurm.window_start.astimezone(UTC).date()
    world = tmp_path / "k8s-day"
    simulate(SimConfig(seed=14, start=day, days=1, nodes=NodeCounts(hpc=1, k8s=2, shared=1),
                       step_seconds=60), world)
    metrics = next(p for p in (world / "prometheus").iterdir() if p.name.startswith("metrics.om"))
    prometheus = real_prometheus(metrics, fresh=True)

    wrapper = tmp_path / "slow-wrapper"
    # the runner passes the whole command as one argument, as it would to ssh
    wrapper.write_text(f'#!/bin/sh\nsleep {SLOW_S}\nexec sh -c "$1"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    site = _write_site(tmp_path, real_slurm.cluster, day, prometheus.url, wrapper)
    db = site.parent / "data" / "gpuledger.duckdb"
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "pipelines" / "dagster.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items()
           if k not in {"GPULEDGER_DB", "GPULEDGER_REPORTS", "GPULEDGER_REPORTS_DIR",
                        "GPULEDGER_SAMPLE_DATA"}}
    env.update({"GPULEDGER_CONFIG": str(site), "DAGSTER_HOME": str(home),
                "PYTHONPATH": str(ROOT), "TZ": "UTC"})

    defs = load_definitions(site)
    daily = defs.resolve_schedule_def("daily_ingest_schedule")
    weekly = defs.resolve_schedule_def("weekly_close_schedule")
    assert daily.default_status == dg.DefaultScheduleStatus.RUNNING

    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
        publish = dg.RunRequest(run_key="first-publish")
        _execute(env, publish, "publish_ledger", tmp_path)  # readers need a first snapshot
        reader = Reader(db, env)
        reader.start()
        try:
            tick = datetime.combine(day + timedelta(days=1), dtime(1, 0), UTC)
            request = daily(dg.build_schedule_context(scheduled_execution_time=tick))
            assert request.partition_key == day.isoformat()
            _execute(env, request, "daily_ingest", tmp_path)
            run = _last_run(instance, "daily_ingest")
            durations = _steps_all_succeeded(instance, run)
            _publish_after(instance, defs, env, run, tmp_path)

            monday = day - timedelta(days=day.weekday())
            tick = datetime.combine(monday + timedelta(days=7), dtime(6, 0), UTC)
            request = weekly(dg.build_schedule_context(scheduled_execution_time=tick))
            assert request.partition_key == monday.isoformat()
            _execute(env, request, "weekly_close", tmp_path)
            weekly_run = _last_run(instance, "weekly_close")
            _steps_all_succeeded(instance, weekly_run)
            _publish_after(instance, defs, env, weekly_run, tmp_path)
        finally:
            reader.stop.set()
            reader.join(timeout=180)

    # the Slurm steps really went through the slow prefix, and waited for nothing but it
    assert durations["slurm_jobs"] >= SLOW_S
    assert durations["sreport_gpu"] >= SLOW_S
    assert reader.failures == []
    assert reader.calls >= 3

    serving = db.with_name(f"{db.stem}.serving.duckdb")
    week = f"{monday:%G-W%V}"
    with duckdb.connect(str(serving), read_only=True) as con:
        by_domain = dict(con.execute(
            "SELECT domain, sum(gpu_seconds)::BIGINT FROM allocations WHERE day = ? "
            "GROUP BY domain", [day]).fetchall())
        invoiced, lines = con.execute(
            "SELECT coalesce(sum(gpu_seconds), 0)::BIGINT, count(*) FROM chargeback "
            "WHERE period = ?", [week]).fetchone()
        ledger_week = con.execute(
            "SELECT coalesce(sum(gpu_seconds), 0)::BIGINT FROM allocations "
            "WHERE strftime(day, '%G-W%V') = ?", [week]).fetchone()[0]
    expected = sacct_gpu_seconds(real_slurm, day)
    assert expected > 0
    assert by_domain.get("slurm") == expected
    assert by_domain.get("kubernetes", 0) > 0
    assert lines > 0
    assert invoiced == ledger_week
    report = site.parent / "reports" / week
    assert (report / "summary.html").is_file()
    assert (report / "invoice-lines.csv").is_file()
