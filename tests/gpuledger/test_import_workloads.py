"""`gpuledger import-workloads` is the one Workload path: it fills kueue_workloads_raw and
kueue_workloads in one transaction, so the detectors see what it loaded; load-world and
`ingest kubernetes --workloads` go through it; bad items are rejected one by one."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from connectors.kubernetes.workload_snapshot import WorkloadSnapshot, read_workload_snapshot
from gpuledger.cli import main
from gpuledger.ingest import service
from gpuledger.site.config import load_settings
from models.runner import connect
from simulator import SimConfig, simulate
from simulator.config import NodeCounts
from tests.helpers import FIXTURES

KUEUE = FIXTURES / "kueue"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("workloads-world")
    simulate(SimConfig(seed=21, days=2, nodes=NodeCounts(hpc=1, k8s=2, shared=1),
                       step_seconds=300), out)
    return out


def _served(db: Path, query: str) -> list[tuple]:
    with duckdb.connect(str(db.with_name(db.stem + ".serving.duckdb")), read_only=True) as con:
        return con.execute(query).fetchall()


def test_import_workloads_then_build_finds_the_partial_gang(world: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture):
    with (world / "truth" / "incidents.csv").open(encoding="utf-8") as fh:
        planted = [r for r in csv.DictReader(fh) if r["kind"] == "partial_gang"]
    assert len(planted) == 1
    db = tmp_path / "l.duckdb"
    base = ["--db", str(db)]
    assert main([*base, "ingest", "kubernetes", "--openmetrics",
                 str(world / "prometheus" / "metrics.om"), "--start", "2026-01-05", "--end",
                 "2026-01-07"]) == 0
    assert main([*base, "build"]) == 0
    # pods alone: the detector needs the Workloads' pod counts
    assert _served(db, "SELECT count(*) FROM incidents WHERE kind = 'partial_gang'") == [(0,)]
    assert main([*base, "import-workloads", str(world / "kueue" / "workloads.json")]) == 0
    assert "kueue_workloads: 80 rows loaded, 0 rejected" in capsys.readouterr().err
    assert main([*base, "build"]) == 0
    found = _served(db, "SELECT k8s_workload, gpus FROM incidents WHERE kind = 'partial_gang'")
    assert found == [(planted[0]["k8s_workload"], 4)]
    assert _served(db, "SELECT (SELECT count(*) FROM kueue_workloads), "
                       "(SELECT count(*) FROM kueue_workloads_raw)") == [(80, 80)]


def test_both_tables_and_the_rejects_come_from_one_read(tmp_path: Path):
    path = tmp_path / "snap.json"
    shutil.copy(KUEUE / "bad-items-one-defect-each.json", path)
    with connect(tmp_path / "l.duckdb") as con:
        result = service.import_workloads(con, path)
        assert (result.source, result.rows, len(result.rejects)) == ("kueue_workloads", 2, 11)
        tables = {t: con.execute(f"SELECT uid FROM {t} ORDER BY uid").fetchall()
                  for t in ("kueue_workloads", "kueue_workloads_raw")}
        assert tables["kueue_workloads"] == tables["kueue_workloads_raw"]
        assert len(tables["kueue_workloads"]) == 2
        rejects = con.execute("SELECT source, line_no, field FROM rejects ORDER BY line_no"
                              ).fetchall()
        assert rejects[:2] == [("kueue_workloads", 1, "items[1].status"),
                               ("kueue_workloads", 2, "items[2].spec.podSets")]
        assert len(rejects) == 11
        before = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                  for t in ("kueue_workloads", "kueue_workloads_raw", "rejects")}
        service.import_workloads(con, path)  # a re-import changes nothing
        again = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in before}
        assert again == before
        runs = con.execute("SELECT source, rows_loaded, rows_rejected FROM ingest_runs "
                           "WHERE source LIKE 'kueue%'").fetchall()
        assert runs == [("kueue_workloads", 2, 11)]


def test_a_failed_write_leaves_neither_table_changed(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    first = KUEUE / "v0.6-preempted-evicted-only.json"
    with connect(tmp_path / "l.duckdb") as con:
        service.import_workloads(con, first)
        before = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                  for t in ("kueue_workloads", "kueue_workloads_raw", "rejects")}

        def broken(path, **kw) -> WorkloadSnapshot:
            snap = read_workload_snapshot(path, **kw)
            # the raw rows are written first; the conditions frame then fails the insert
            return WorkloadSnapshot(snap.raw, snap.workloads.drop("preempted"), snap.rejects)

        monkeypatch.setattr(service, "read_workload_snapshot", broken)
        with pytest.raises(ValueError, match="missing \\['preempted'\\]"):
            service.import_workloads(con, KUEUE / "v0.7-docs-preempted.json")
        after = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in before}
        assert after == before


def test_gpu_resources_setting_reaches_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    snap = KUEUE / "dra-resource-claim-template.json"
    query = "SELECT gpus_per_pod, gpus_admitted, gpu_resource FROM kueue_workloads"
    db = tmp_path / "l.duckdb"
    assert main(["--db", str(db), "import-workloads", str(snap)]) == 0
    assert _served(db, query) == [(0, None, None)]
    (tmp_path / "gpuledger.toml").write_text(
        '[gpuledger]\ngpu_resources = ["nvidia.com/gpu", "example.com/gpu"]\n')
    assert main(["--db", str(db), "import-workloads", str(snap)]) == 0
    assert _served(db, query) == [(1, 1, "example.com/gpu")]
    monkeypatch.setenv("GPULEDGER_GPU_RESOURCES", "amd.com/gpu")
    assert main(["--db", str(db), "import-workloads", str(snap)]) == 0
    assert _served(db, query) == [(0, None, None)]


def test_a_bad_gpu_resources_setting_is_a_clear_error(tmp_path: Path, capsys,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPULEDGER_GPU_RESOURCES", " , ")
    code = main(["--db", str(tmp_path / "l.duckdb"), "import-workloads",
                 str(KUEUE / "v0.7-docs-preempted.json")])
    assert code == 1
    assert "expected at least one GPU resource name in gpu_resources" in capsys.readouterr().err


def test_load_world_and_ingest_kubernetes_use_the_same_path(world: Path, tmp_path: Path):
    db = tmp_path / "w.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    loaded = _served(db, "SELECT * FROM kueue_workloads ORDER BY uid")
    runs = _served(db, "SELECT source, partition_key FROM ingest_runs "
                       "WHERE source LIKE 'kueue_workload%'")
    assert runs == [("kueue_workloads", str(world / "kueue" / "workloads.json"))]
    other = tmp_path / "i.duckdb"
    assert main(["--db", str(other), "ingest", "kubernetes", "--openmetrics",
                 str(world / "prometheus" / "metrics.om"), "--start", "2026-01-05", "--end",
                 "2026-01-06", "--workloads", str(world / "kueue" / "workloads.json")]) == 0
    assert _served(other, "SELECT * FROM kueue_workloads ORDER BY uid") == loaded
    assert _served(other, "SELECT count(*) FROM kueue_workloads_raw") == [(len(loaded),)]
    assert len(loaded) == 80


def test_null_status_no_longer_crashes_the_cli(tmp_path: Path, capsys):
    doc = json.loads((KUEUE / "bad-items-one-defect-each.json").read_text())
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    assert main(["--db", str(tmp_path / "l.duckdb"), "import-workloads", str(path)]) == 0
    err = capsys.readouterr().err
    assert "kueue_workloads: 2 rows loaded, 11 rejected" in err
    assert "field items[1].status: expected an object or no field, found null" in err


@pytest.mark.parametrize(("toml", "message"), [
    ("gpu_resources = 3", "expected gpu_resources as a list of resource names, found 3"),
    ('gpu_resources = ["nvidia.com/gpu", 2]', "expected gpu_resources as a list"),
    ("gpu_resources = []", "expected at least one GPU resource name"),
])
def test_gpu_resources_setting_is_checked(toml: str, message: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GPULEDGER_GPU_RESOURCES", raising=False)
    config = tmp_path / "gpuledger.toml"
    config.write_text(f"[gpuledger]\n{toml}\n")
    with pytest.raises(ValueError, match=message.replace("[", "\\[")):
        load_settings(config)
    config.write_text('[gpuledger]\ngpu_resources = [" example.com/gpu ", "example.com/gpu"]\n')
    assert load_settings(config).gpu_resources == ("example.com/gpu",)
