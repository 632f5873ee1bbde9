"""Kubernetes ingest through the fixture twin: window merging, atomicity, absent metrics, label
spellings, Workload conditions and the CLI."""

import json
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from connectors.errors import SourceError
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.cli import main
from gpuledger.ingest import service
from gpuledger.ingest.kubernetes import run as k8s_ingest
from gpuledger.ingest.kubernetes.window_store import coalesce_intervals
from models.runner import connect
from simulator import SimConfig, simulate
from simulator.config import NodeCounts

DAY1, DAY2, DAY3 = datetime(2026, 1, 5), datetime(2026, 1, 6), datetime(2026, 1, 7)
TABLES = ("k8s_pod_allocation_pieces", "k8s_pod_allocations", "k8s_pod_phases", "k8s_pod_gpus",
          "k8s_node_capacity_pieces", "k8s_node_capacity", "gpu_utilization", "gpu_busy_daily",
          "kueue_counters", "kueue_pending", "kueue_admission_wait",
          "kueue_admission_wait_buckets", "kueue_queue_resources", "k8s_ingest_warnings")
# what the data say, independent of how the period was cut into windows
MERGED = ("k8s_pod_allocations", "k8s_pod_phases", "k8s_pod_gpus", "k8s_node_capacity",
          "gpu_utilization", "gpu_busy_daily", "kueue_counters", "kueue_pending",
          "kueue_admission_wait", "kueue_admission_wait_buckets", "kueue_queue_resources")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("k8s-world")
    simulate(SimConfig(seed=21, days=2, nodes=NodeCounts(hpc=1, k8s=2, shared=1),
                       step_seconds=300), out)
    return out


@pytest.fixture(scope="module")
def source(world: Path) -> OpenMetricsFileSource:
    return OpenMetricsFileSource(world / "prometheus" / "metrics.om")


def dump(con: duckdb.DuckDBPyConnection, tables=TABLES) -> dict[str, list[tuple]]:
    return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}


def ingest(con, source, windows, **kwargs):
    return [k8s_ingest.ingest_kubernetes_window(con, source, a, b, cluster="gpulab", **kwargs)
            for a, b in windows]


class FilteredSource:
    """The fixture twin with some metrics absent and some labels renamed."""

    def __init__(self, inner, *, drop: tuple[str, ...] = (), rename: dict | None = None):
        self.inner, self.drop, self.rename = inner, drop, rename or {}

    def raw_samples(self, selector, start, end):
        if any(selector.startswith(d) for d in self.drop):
            return self.inner.raw_samples("no_such_metric", start, end)
        frame = self.inner.raw_samples(selector, start, end)
        for metric, (old, new) in self.rename.items():
            if selector.startswith(metric) and old in frame.columns:
                frame = frame.rename({old: new})
        return frame

    def series(self, match, start, end):
        return self.inner.series(match, start, end)


class FailingSource:
    """Answers `fail_after` reads, then fails like an unreachable Prometheus."""

    def __init__(self, inner, fail_after: int):
        self.inner, self.left = inner, fail_after

    def raw_samples(self, selector, start, end):
        if self.left <= 0:
            msg = "Prometheus at http://127.0.0.1:1 did not answer: ConnectionError"
            raise SourceError(msg)
        self.left -= 1
        return self.inner.raw_samples(selector, start, end)

    def series(self, match, start, end):
        return self.inner.series(match, start, end)


def test_pod_across_midnight_is_one_row_in_any_window_order_and_reruns_change_nothing(
    source, tmp_path: Path
):
    with connect(tmp_path / "a.duckdb") as a, connect(tmp_path / "b.duckdb") as b, \
            connect(tmp_path / "c.duckdb") as c:
        loads = ingest(a, source, [(DAY1, DAY2), (DAY2, DAY3)])
        assert loads[0].scrape_interval_s == 300.0
        crossing = a.execute(
            "SELECT uid, count(*), min(start_ts), max(end_ts) FROM k8s_pod_allocations "
            "GROUP BY uid HAVING min(start_ts) < ? AND max(end_ts) > ?", [DAY2, DAY2]).fetchall()
        assert crossing, "the world has pods running across midnight"
        assert all(n == 1 for _, n, _, _ in crossing)
        pieces = a.execute("SELECT count(*) FROM k8s_pod_allocation_pieces WHERE uid IN ("
                           "SELECT uid FROM k8s_pod_allocations WHERE start_ts < ? AND end_ts > ?)",
                           [DAY2, DAY2]).fetchone()[0]
        assert pieces == 2 * len(crossing)
        once = dump(a)

        ingest(a, source, [(DAY1, DAY2)])  # re-running a window changes nothing
        assert dump(a) == once
        ingest(b, source, [(DAY2, DAY3), (DAY1, DAY2)])  # order does not matter
        assert dump(b, MERGED) == dump(a, MERGED)
        six_hours = [(DAY1 + timedelta(hours=6 * i), DAY1 + timedelta(hours=6 * (i + 1)))
                     for i in range(8)]
        ingest(c, source, six_hours)  # nor how the period is cut
        assert dump(c, MERGED) == dump(a, MERGED)
        assert a.execute("SELECT count(*) FROM ingest_runs WHERE source = 'kubernetes'"
                         ).fetchone() == (2,)


def test_sample_counts_and_interval_ends(source, tmp_path: Path):
    with connect(tmp_path / "l.duckdb") as con:
        ingest(con, source, [(DAY1, DAY2), (DAY2, DAY3)])
        rows = con.execute("SELECT start_ts, end_ts, samples, scrape_interval_s, gpus, "
                           "gpu_seconds, start_source, end_source "
                           "FROM k8s_pod_allocations").fetchall()
    assert rows
    exact = ("kube_pod_start_time", "kube_pod_completion_time")
    for start, end, samples, interval, gpus, seconds, start_source, end_source in rows:
        # one Running sample per scrape interval, except where clipped to the data's window;
        # an exact end (docs/kubernetes.md, "Pod boundaries") lies within one interval of the
        # grid end it replaces
        slack = (start_source in exact) + (end_source in exact)
        assert abs((end - start).total_seconds() / interval - samples) < max(slack, 0.5) \
            or end == DAY3 or start == DAY1
        assert seconds == gpus * (end - start).total_seconds()
    assert {s for r in rows for s in r[6:]} >= {*exact, "scrape_grid"}


def test_failure_mid_window_writes_nothing_and_a_rerun_completes(source, tmp_path: Path):
    with connect(tmp_path / "ok.duckdb") as ok:
        ingest(ok, source, [(DAY1, DAY2), (DAY2, DAY3)])
        reference = dump(ok, MERGED)
    with connect(tmp_path / "l.duckdb") as con:
        ingest(con, source, [(DAY1, DAY2)])
        before = dump(con, (*TABLES, "ingest_runs"))
        for fail_after in (0, 3, 12, 25):
            with pytest.raises(SourceError, match="did not answer"):
                ingest(con, FailingSource(source, fail_after), [(DAY2, DAY3)])
            assert dump(con, (*TABLES, "ingest_runs")) == before
        ingest(con, source, [(DAY2, DAY3)])
        assert dump(con, MERGED) == reference


def test_absent_metrics_give_warnings_and_empty_tables_not_errors(source, tmp_path: Path):
    thin = FilteredSource(source, drop=("DCGM_", "kube_pod_labels", "kube_pod_service_account",
                                        "kueue_"))
    with connect(tmp_path / "l.duckdb") as con:
        load, = ingest(con, thin, [(DAY1, DAY2)])
        text = "\n".join(load.warnings)
        assert "neither DCGM_FI_PROF_GR_ENGINE_ACTIVE nor DCGM_FI_DEV_GPU_UTIL" in text
        assert "kube_pod_labels absent" in text
        assert "kube_pod_service_account absent" in text
        assert "kueue_admitted_workloads_total: no samples" in text
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        assert counts["gpu_utilization"] == counts["kueue_counters"] == 0
        assert counts["gpu_busy_daily"] == counts["k8s_pod_gpus"] == 0
        assert counts["k8s_node_capacity"] > 0
        total, labels, queues, accounts, owners = con.execute(
            "SELECT count(*), count(labels), count(queue_name), count(service_account), "
            "count(owner_kind) FROM k8s_pod_allocations").fetchone()
        assert total > 0
        assert (labels, queues, accounts) == (0, 0, 0)
        assert owners > 0  # kube_pod_owner still read
        stored = con.execute("SELECT DISTINCT component FROM k8s_ingest_warnings").fetchall()
        assert {c for c, in stored} == {"dcgm", "ksm", "kueue"}

    no_phase = FilteredSource(source, drop=("kube_pod_status_phase",))
    with connect(tmp_path / "m.duckdb") as con:
        load, = ingest(con, no_phase, [(DAY1, DAY2)])
        assert 'kube_pod_status_phase{phase="Running"}: no samples; no pod counted as Running' \
            in load.warnings
        assert con.execute("SELECT count(*) FROM k8s_pod_allocations").fetchone() == (0,)

    nothing = FilteredSource(source, drop=("kube_", "DCGM_", "kueue_"))
    with connect(tmp_path / "n.duckdb") as con:
        load, = ingest(con, nothing, [(DAY1, DAY2)])
        assert load.rows == 0
        assert load.scrape_interval_s is None
        assert any("scrape interval unknown" in w for w in load.warnings)


def test_unknown_label_spellings_are_reported(source, tmp_path: Path):
    odd = FilteredSource(source, rename={
        "kube_pod_labels": ("label_kueue_x_k8s_io_queue_name", "label_kueue_queue"),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("pod", "k8s_pod_name"),
    })
    with connect(tmp_path / "l.duckdb") as con:
        load, = ingest(con, odd, [(DAY1, DAY2)])
        warnings = con.execute("SELECT component, message FROM k8s_ingest_warnings").fetchall()
    assert ("ksm", "kube_pod_labels: label_kueue_queue looks like a Kueue queue label but is "
                   "not label_kueue_x_k8s_io_queue_name; not used as the pod's LocalQueue") \
        in warnings
    assert any(c == "dcgm" and "label 'k8s_pod_name' looks like a holder label" in m
               for c, m in warnings)
    assert len(load.warnings) == len(warnings)


def _workload(name, *, conditions, admission=None, owner=("Job", "job-a"), stats=None,
              requeue=None, min_count=None):
    pod_set = {"count": 2, "name": "main", "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}}}
    if min_count is not None:
        pod_set["minCount"] = min_count
    status = {"conditions": [
        {"type": t, "status": s, "reason": r, "message": f"{t} {r}",
         "lastTransitionTime": at} for t, s, r, at in conditions]}
    if admission:
        status["admission"] = {"clusterQueue": admission, "podSetAssignments": [
            {"name": "main", "count": 2, "flavors": {"nvidia.com/gpu": "h100"},
             "resourceUsage": {"nvidia.com/gpu": "4"}}]}
    if stats:
        status["schedulingStats"] = {"evictions": stats}
    if requeue:
        status["requeueState"] = requeue
    return {
        "kind": "Workload",
        "metadata": {"uid": f"uid-{name}", "name": name, "namespace": "team-llm",
                     "creationTimestamp": "2026-01-05T10:00:00Z",
                     "ownerReferences": [{"kind": owner[0], "name": owner[1], "uid": "o-1",
                                          "controller": True}]},
        "spec": {"queueName": "lq-llm", "podSets": [pod_set], "priority": 0},
        "status": status,
    }


def test_workload_conditions_are_read(tmp_path: Path):
    t = "2026-01-05T1{}:00:00Z".format
    items = [
        _workload("pending", conditions=[("QuotaReserved", "False", "Pending", t(0))]),
        _workload("done", admission="cq-training", min_count=1, conditions=[
            ("QuotaReserved", "True", "QuotaReserved", t(1)), ("Admitted", "True", "Admitted",
                                                                t(1)),
            ("PodsReady", "True", "Started", t(2)), ("Finished", "True", "Succeeded", t(3))]),
        _workload("preempted-then-readmitted", admission="cq-training", conditions=[
            ("QuotaReserved", "True", "QuotaReserved", t(5)),
            ("Admitted", "True", "Admitted", t(5)),
            ("Evicted", "False", "QuotaReserved", t(5)),
            ("Preempted", "False", "QuotaReserved", t(5))],
            stats=[{"reason": "Preempted", "count": 1}]),
        _workload("timed-out", conditions=[
            ("QuotaReserved", "False", "Pending", t(4)), ("Admitted", "False", "NoReservation",
                                                          t(4)),
            ("Evicted", "True", "PodsReadyTimeout", t(4))],
            stats=[{"reason": "PodsReadyTimeout", "count": 2}],
            requeue={"count": 2, "requeueAt": t(5)}),
        _workload("pod-group", owner=("Pod", "server-0"), admission="cq-inference",
                  conditions=[("Admitted", "True", "Admitted", t(1))]),
        {"kind": "Workload", "metadata": {"name": "no-uid"}},
    ]
    path = tmp_path / "workloads.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    with connect(tmp_path / "l.duckdb") as con:
        raw = service.import_workloads(con, path)
        result = k8s_ingest.import_workload_conditions(con, path)
        assert (raw.rows, result.rows, len(result.rejects)) == (5, 5, 1)
        rows = con.execute("SELECT * FROM kueue_workloads ORDER BY name").pl()
        again = k8s_ingest.import_workload_conditions(con, path)
        assert again.rows == 5
        assert con.execute("SELECT * FROM kueue_workloads ORDER BY name").pl().equals(rows)
        assert con.execute("SELECT count(*) FROM kueue_workloads_raw").fetchone() == (5,)
    by = {r["name"]: r for r in rows.iter_rows(named=True)}
    at = datetime.fromisoformat
    done = by["done"]
    assert (done["cluster_queue"], done["queue_name"], done["owner_kind"], done["owner_name"]) \
        == ("cq-training", "lq-llm", "Job", "job-a")
    assert (done["pods_wanted"], done["min_count"], done["gpus_per_pod"],
            done["gpus_admitted"], done["flavor"]) == (2, 1, 2, 4, "h100")
    assert (done["admitted_at"], done["pods_ready_at"], done["finished_at"],
            done["finished_reason"]) == (at("2026-01-05T11:00"), at("2026-01-05T12:00"),
                                         at("2026-01-05T13:00"), "Succeeded")
    assert not done["evicted"]
    assert done["eviction_count"] == 0
    pending = by["pending"]
    assert (pending["quota_reserved"], pending["admitted"], pending["cluster_queue"],
            pending["pending_message"]) == (False, False, None, "QuotaReserved Pending")
    pre = by["preempted-then-readmitted"]
    assert (pre["evicted"], pre["evicted_reason"], pre["preempted"], pre["eviction_count"],
            pre["admitted_at"]) == (False, "Preempted", True, 1, at("2026-01-05T15:00"))
    out = by["timed-out"]
    assert (out["evicted"], out["evicted_at"], out["evicted_reason"], out["eviction_count"],
            out["requeue_count"], out["requeue_at"], out["eviction_reasons"]) == (
        True, at("2026-01-05T14:00"), "PodsReadyTimeout", 2, 2, at("2026-01-05T15:00"),
        "PodsReadyTimeout=2")
    assert (by["pod-group"]["owner_kind"], by["pod-group"]["owner_name"]) == ("Pod", "server-0")


def test_cli_ingest_kubernetes(world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    db = tmp_path / "l.duckdb"
    om = str(world / "prometheus" / "metrics.om")
    argv = ["--db", str(db), "ingest", "kubernetes", "--openmetrics", om, "--start",
            "2026-01-05", "--end", "2026-01-07", "--cluster", "gpulab", "--workloads",
            str(world / "kueue" / "workloads.json")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "[1/2] prometheus 2026-01-05" in err
    assert "[2/2] prometheus 2026-01-06" in err
    assert "(scrape interval 300 s)" in err
    assert "kueue_workload_conditions: " in err
    with duckdb.connect(str(db.with_name("l.serving.duckdb")), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM k8s_pod_allocations").fetchone()[0] > 0
        assert con.execute("SELECT count(*) FROM kueue_workloads").fetchone()[0] > 0
        assert con.execute("SELECT DISTINCT cluster FROM gpu_utilization").fetchall() \
            == [("gpulab",)]


@pytest.mark.parametrize(("extra", "message"), [
    ([], "expected --prometheus-url"),
    (["--prometheus-url", "http://127.0.0.1:9", "--header", "no colon"], "expected --header"),
    (["--prometheus-url", "ftp://x"], "expected an http(s) URL"),
])
def test_cli_ingest_kubernetes_argument_errors(extra, message, tmp_path: Path, capsys,
                                               monkeypatch):
    monkeypatch.delenv("GPULEDGER_PROMETHEUS_URL", raising=False)
    argv = ["--db", str(tmp_path / "l.duckdb"), "ingest", "kubernetes", "--start", "2026-01-05",
            "--end", "2026-01-06", *extra]
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_cli_reports_an_unreachable_server_and_writes_nothing(tmp_path: Path, capsys):
    db = tmp_path / "l.duckdb"
    argv = ["--db", str(db), "ingest", "kubernetes", "--prometheus-url", "http://127.0.0.1:9",
            "--retries", "0", "--timeout", "2", "--start", "2026-01-05", "--end", "2026-01-06"]
    assert main(argv) == 1
    assert "did not answer" in capsys.readouterr().err
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM ingest_runs").fetchone() == (0,)


def test_coalesce_intervals_merges_touching_pieces_only():
    ts = datetime(2026, 1, 5)
    frame = pl.DataFrame({
        "uid": ["a", "a", "a", "b"],
        "node": ["n1", "n1", "n2", "n1"],
        "start_ts": [ts, ts + timedelta(hours=1), ts + timedelta(hours=2), ts],
        "end_ts": [ts + timedelta(hours=1), ts + timedelta(hours=2), ts + timedelta(hours=3),
                   ts + timedelta(minutes=5)],
        "samples": [60, 60, 60, 5],
        "scrape_interval_s": [60.0] * 4,
        "labels": [None, '{"owner":"x"}', None, None],
    })
    out = coalesce_intervals(frame, ["uid"], ["node"], ["labels"]).sort(
        "uid", "start_ts")
    assert out.select("uid", "node", "samples", "labels").rows() == [
        ("a", "n1", 120, '{"owner":"x"}'), ("a", "n2", 60, None), ("b", "n1", 5, None)]
    assert out["end_ts"][0] == ts + timedelta(hours=2)
