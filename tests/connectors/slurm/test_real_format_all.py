"""Real dumps in other shapes than gpuledger's own extraction: `sacct --format=ALL` and a site's
field list from the test cluster (tests/fixtures/real_slurm/format-all, see its README), and
sacct output published by real sites (tests/fixtures/real_slurm/sites). Through the ledger, the
GPU-seconds per account and user equal what sreport reported for the same job set."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from connectors.slurm.header import SacctFormatError
from connectors.slurm.parse import SacctParse, parse_sacct
from connectors.slurm.sreport import parse_account_utilization_by_user
from gpuledger.ingest.slurm import run as slurm_ingest
from gpuledger.ingest.slurm import scontrol as scontrol_ingest
from models.build import build_allocations
from models.runner import connect

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "real_slurm"
WIDE = FIXTURES / "format-all"
SITES = FIXTURES / "sites"
CLUSTER = "gpuledger"


def _env(path: Path) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in path.read_text().splitlines() if "=" in ln)


def _manifest() -> dict[str, str]:
    lines = (WIDE / "manifest.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return {cols[0]: cols[1] for cols in (ln.split("\t") for ln in lines if ln)}


WINDOW = _env(WIDE / "window.env")
REPORT_DAY = datetime.fromtimestamp(int(WINDOW["ROLLUP_START"]), UTC).date()


def _parse(name: str, **kw: object) -> SacctParse:
    r = parse_sacct(WIDE / name, source_file=name, **kw)
    r.check_counts()
    return r


def _sreport_per_user() -> dict[tuple[str, str], int]:
    table = parse_account_utilization_by_user(
        WIDE / "sreport-account-utilization-by-user-gpu.txt", source_file="sreport")
    rows = table.filter(~pl.col("is_account_total") & (pl.col("used_seconds") > 0))
    return {(a, u): s for a, u, s in rows.select("account", "login", "used_seconds").iter_rows()}


def _ledger(tmp_path: Path, name: str, *, cluster: str | None = None,
            snapshot_first: bool | None = None) -> tuple[dict[tuple[str, str], int], list]:
    """Load the dump (and the scontrol snapshot before or after it, or not at all), build the
    report day, and return the GPU-seconds per (account, user) and the per-node rows."""
    with connect(tmp_path / f"{name}-{snapshot_first}.duckdb") as con:
        snap = WIDE / "scontrol-snapshot.txt"
        if snapshot_first:
            assert scontrol_ingest.import_scontrol_file(con, snap).rejects == ()
        load = slurm_ingest.import_sacct_file(con, WIDE / name, cluster=cluster)
        assert load.rejects == ()
        if snapshot_first is False:
            assert scontrol_ingest.import_scontrol_file(con, snap).rejects == ()
        build_allocations(con, REPORT_DAY, REPORT_DAY)
        per_user = {(a, u): s for a, u, s in con.execute(
            "SELECT slurm_account, slurm_user, sum(gpu_seconds) FROM allocations "
            "GROUP BY ALL HAVING sum(gpu_seconds) > 0").fetchall()}
        nodes = con.execute(
            "SELECT job_id, node, gpus, gpus_source, evidence FROM stg_allocations "
            "ORDER BY job_id, node").fetchall()
    return per_user, nodes


# ---------------------------------------------------------------- the test cluster, other shapes


def test_format_all_dump_loads_every_line():
    r = _parse("sacct-format-all-P.txt")
    assert r.rejects == []
    assert len(r.fields) == 109
    assert (r.runs.height, r.steps.height) == (19, 43)
    m = _manifest()
    pipe = r.runs.filter(pl.col("job_id") == m["name-pipe"]).row(0, named=True)
    assert (pipe["job_name"], pipe["alloc_gpus"], pipe["line_no"]) == ("train|resnet50", 1, 43)
    two = r.runs.filter(pl.col("job_id") == m["two-node"]).row(0, named=True)
    assert (two["alloc_nodes"], two["alloc_cpus"], two["alloc_gpus"]) == (2, 4, 4)


def test_format_all_and_site_list_dumps_give_the_same_runs():
    wide = _parse("sacct-format-all-P.txt")
    site = _parse("sacct-site-fields-P.txt", cluster=CLUSTER)
    assert site.rejects == []
    cols = ["job_id", "state", "submit", "start", "end", "alloc_gpus", "alloc_nodes",
            "alloc_cpus", "nodes", "account", "user"]
    assert site.runs.select(cols).sort("job_id", "submit").equals(
        wide.runs.select(cols).sort("job_id", "submit"))
    # without JobIDRaw: plain ids give the same run keys, array tasks key by their JobID
    keys = dict(zip(site.runs["job_id"], site.runs["run_key"], strict=True))
    wide_keys = dict(zip(wide.runs["job_id"], wide.runs["run_key"], strict=True))
    array = _manifest()["array"]
    for job_id, key in keys.items():
        if job_id.startswith(f"{array}_"):
            assert key.split(":")[1] == job_id
            assert wide_keys[job_id].split(":")[1].isdigit()
        else:
            assert key == wide_keys[job_id]
    assert site.steps["run_key"].null_count() == 0


def test_sacct_default_fields_are_refused_naming_what_is_missing():
    with pytest.raises(SacctFormatError) as exc:
        _parse("sacct-default-fields-P.txt")
    assert str(exc.value).startswith(
        "sacct-default-fields-P.txt: expected Submit, Start, End, NodeList, AllocTRES, Cluster "
        "in the header")
    assert "the header is JobID, JobName, Partition, Account, AllocCPUS, State, ExitCode" in str(
        exc.value)


@pytest.mark.parametrize(("name", "cluster"), [
    ("sacct-format-all-P.txt", None), ("sacct-site-fields-P.txt", CLUSTER)])
@pytest.mark.parametrize("snapshot_first", [None, True, False],
                         ids=["no-snapshot", "scontrol-first", "sacct-first"])
def test_gpu_seconds_per_account_equal_sreport(tmp_path: Path, name: str, cluster: str | None,
                                               snapshot_first: bool | None):
    per_user, _ = _ledger(tmp_path, name, cluster=cluster, snapshot_first=snapshot_first)
    sreport = _sreport_per_user()
    assert len(sreport) == 4
    assert per_user == sreport


@pytest.mark.parametrize("name", ["sacct-format-all-P.txt", "sacct-site-fields-P.txt"])
def test_the_five_gpu_two_node_job_takes_its_split_from_scontrol(tmp_path: Path, name: str):
    job = _manifest()["gpus-5-two-node"]
    cluster = None if "format-all" in name else CLUSTER
    for first in (True, False):
        _, nodes = _ledger(tmp_path, name, cluster=cluster, snapshot_first=first)
        mine = [n for n in nodes if n[0] == job]
        assert [n[1:4] for n in mine] == [("a100-01", 4, "scontrol"), ("a100-02", 1, "scontrol")]
        assert "GPUs per node from scontrol" in mine[0][4]
        assert "(indices 0,1,2,3)" in mine[0][4]
        assert mine[1][4].endswith(": 1 of the run's 5 (indices 0)")
    _, nodes = _ledger(tmp_path, name, cluster=cluster, snapshot_first=None)
    mine = [n for n in nodes if n[0] == job]
    assert [n[1:4] for n in mine] == [("a100-01", 3, "even_split"), ("a100-02", 2, "even_split")]
    assert mine[0][4].endswith("; GPUs per node estimated: 5 GPUs split evenly over 2 nodes, 2 "
                               "each and 1 more on the first 1 in hostlist order (no scontrol "
                               "snapshot of the run)")


# ------------------------------------------------------------------------------- real sites


def test_habrok_dump_without_jobidraw_cluster_or_header_names_of_ours_loads():
    """rug-cit-hpc/hb-jobinfo test/data/sacct.txt (see sites/README.md): --parsable with a
    trailing ☃ delimiter, NNodes/NCPUS, no JobIDRaw or Cluster, naive Europe/Amsterdam times."""
    path = SITES / "hb-jobinfo-sacct-habrok.txt"
    with pytest.raises(SacctFormatError, match="expected Cluster in the header"):
        parse_sacct(path, delimiter="☃", source_file=path.name)
    r = parse_sacct(path, delimiter="☃", timezone="Europe/Amsterdam", source_file=path.name,
                    cluster="habrok")
    r.check_counts()
    assert r.rejects == []
    assert (r.lines_read, r.runs.height, r.steps.height) == (242, 100, 142)
    assert r.steps["run_key"].null_count() == 0
    gpu = r.runs.filter(pl.col("alloc_gpus") > 0)
    assert gpu.height == 9
    array = r.runs.filter(pl.col("job_id") == "5908801_3").row(0, named=True)
    assert (array["job_id_raw"], array["array_job_id"], array["array_task_id"]) == (None, 5908801,
                                                                                    3)
    assert array["run_key"].startswith("habrok:5908801_3:")
    two = r.runs.filter(pl.col("job_id") == "7971484").row(0, named=True)
    assert (two["nodes"], two["alloc_gpus"], two["alloc_nodes"]) == (["a100gpu2", "a100gpu4"], 4,
                                                                      2)


def test_habrok_multi_node_gpu_job_is_marked_estimated(tmp_path: Path):
    path = SITES / "hb-jobinfo-sacct-habrok.txt"
    with connect(tmp_path / "h.duckdb") as con:
        load = slurm_ingest.import_sacct_file(con, path, delimiter="☃",
                                              timezone="Europe/Amsterdam", cluster="habrok")
        assert (load.runs, load.steps, load.rejects) == (100, 142, ())
        rows = con.execute("SELECT node, gpus, gpus_source FROM slurm_node_allocations "
                           "WHERE job_id = '7971484' ORDER BY node").fetchall()
    assert rows == [("a100gpu2", 2, "even_split"), ("a100gpu4", 2, "even_split")]


def test_slurm_20_11_format_all_of_pending_jobs_loads_though_nnodes_is_not_allocnodes():
    """TREX-CoE/BatchSystem's `sacct -X -P --format ALL` (Slurm 20.11.4): AllocNodes 0, NNodes 1
    on jobs that were never allocated nodes, as sacct prints them."""
    path = SITES / "trex-batchsystem-sacct-format-all-pending.txt"
    r = parse_sacct(path, source_file=path.name)
    r.check_counts()
    assert r.rejects == []
    assert (r.lines_read, r.blank_lines, len(r.fields)) == (6, 1, 107)
    assert r.runs.select("job_id", "state", "alloc_nodes", "alloc_gpus").rows() == [
        (str(j), "PENDING", 0, 0) for j in range(4, 9)]
    assert r.runs["start"].null_count() == 5  # never started: nothing to charge
