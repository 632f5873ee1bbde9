"""Dumps in the shapes sites really take them, from the real Slurm 22.05 of the suite:
`sacct --format=ALL --duplicates -P` and a site's own field list with NNodes/NCPUS (no JobIDRaw,
no Cluster). Loaded as a site would load them (`import-sacct`), the GPU-seconds per account and
user equal sreport's; the 5-GPU two-node job takes its GPUs per node from the scontrol snapshot
submit-jobs.sh took while it ran."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.slurm.commands import CommandRunner
from connectors.slurm.scontrol import parse_scontrol_jobs
from gpuledger.cli import main
from gpuledger.ingest.slurm import run as slurm_ingest
from gpuledger.ingest.slurm import scontrol as scontrol_ingest
from models import load_sql
from models.build import build_allocations
from models.runner import connect

pytestmark = pytest.mark.slurm

SITE_FIELDS = ("JobID,JobName,User,Account,Partition,QOS,State,Submit,Start,End,Elapsed,NNodes,"
               "NCPUS,NodeList,AllocTRES")


def _iso(ts) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S")


def _dump(real_slurm, tmp_path: Path, name: str, fmt: str) -> Path:
    """`TZ=UTC sacct --allusers --duplicates --parsable2 --format=FMT` over the rolled-up hours."""
    text = real_slurm.sacct(["--allusers", "--duplicates", "--parsable2", f"--format={fmt}",
                             "-S", _iso(real_slurm.report_start),
                             "-E", _iso(real_slurm.report_end)])
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _window(real_slurm):
    return real_slurm.report_start.replace(tzinfo=None), real_slurm.report_end.replace(tzinfo=None)


def _compare_with_sreport(con, real_slurm) -> pl.DataFrame:
    """sreport's user rows next to ours, from slurm_runs and from the built ledger."""
    start, end = _window(real_slurm)
    slurm_ingest.ingest_sreport(con, CommandRunner(timeout_s=60), start, end)
    table = con.sql(load_sql("slurm_sreport_reconciliation"),
                    params={"window_start": start, "window_end": end}).pl()
    build_allocations(con, start.date(), (end - timedelta(microseconds=1)).date())
    ledger = con.execute(
        "SELECT slurm_account AS account, slurm_user AS \"user\", sum(gpu_seconds) AS ledger "
        "FROM allocations WHERE start_ts >= ? AND end_ts <= ? GROUP BY ALL",
        [start, end]).pl()
    return table.join(ledger, on=["account", "user"], how="full", coalesce=True)


def _assert_equal_to_sreport(table: pl.DataFrame) -> None:
    assert table.height >= 3, table
    assert table["sreport_gpu_seconds"].sum() > 0
    assert table.filter(pl.col("difference") != 0).is_empty(), table
    assert table.filter(pl.col("ledger").fill_null(0) != pl.col("sreport_gpu_seconds")
                        ).is_empty(), table
    assert {"physics", "ml-research", "ops"} <= set(table["account"])


def test_format_all_dump_gives_sreport_s_gpu_seconds_per_account(real_slurm, tmp_path: Path):
    path = _dump(real_slurm, tmp_path, "sacct-format-all-P.txt", "ALL")
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("|")
    assert len(header) == 109
    assert {"AllocNodes", "NNodes", "AllocCPUS", "NCPUS", "SubmitLine", "WorkDir"} <= set(header)
    pipe = real_slurm.job_id("name-pipe")
    odd = [ln for ln in lines[1:] if len(ln.split("|")) != len(header)]
    assert [ln.split("|")[header.index("JobID")] for ln in odd] == [pipe]  # JobName + SubmitLine
    with connect(tmp_path / "ledger.duckdb") as con:
        load = slurm_ingest.import_sacct_file(con, path)
        assert load.rejects == ()
        assert load.runs >= 17
        assert con.execute("SELECT job_name FROM slurm_runs WHERE job_id = ?", [pipe]
                           ).fetchone() == ("train|resnet50",)
        _assert_equal_to_sreport(_compare_with_sreport(con, real_slurm))


def test_site_field_list_with_nnodes_and_ncpus_gives_sreport_s_gpu_seconds(real_slurm, tmp_path):
    path = _dump(real_slurm, tmp_path, "sacct-site-P.txt", SITE_FIELDS)
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "import-sacct", str(path)]) == 1  # no Cluster: says so
    assert main(["--db", str(db), "import-sacct", str(path), "--cluster",
                 real_slurm.cluster]) == 0
    with connect(db) as con:
        assert con.execute("SELECT count(*) FROM rejects").fetchone() == (0,)
        runs = con.execute("SELECT job_id, job_id_raw, run_key FROM slurm_runs").fetchall()
        array = real_slurm.job_id("array")
        tasks = [r for r in runs if r[0].startswith(f"{array}_")]
        assert len(tasks) == 4
        assert all(raw is None and key.split(":")[1] == job for job, raw, key in tasks)
        two = real_slurm.job_id("two-node")
        assert con.execute("SELECT alloc_nodes, alloc_cpus FROM slurm_runs WHERE job_id = ?",
                           [two]).fetchone() == (2, 4)
        _assert_equal_to_sreport(_compare_with_sreport(con, real_slurm))


def _snapshot_split(real_slurm, job: str) -> list[tuple[str, int]]:
    parsed = parse_scontrol_jobs(real_slurm.scontrol_snapshot.read_text(encoding="utf-8"),
                                 source_file="snapshot")
    rows = parsed.gpus.filter(pl.col("job_id") == job)
    return rows.group_by("node").agg(pl.len().alias("gpus")).sort("node").rows()


@pytest.mark.parametrize("order", ["sacct-first", "scontrol-first"])
def test_the_five_gpu_two_node_job_is_split_as_slurm_split_it(real_slurm, tmp_path: Path,
                                                              order: str):
    job = real_slurm.job_id("gpus-5-two-node")
    expected = _snapshot_split(real_slurm, job)
    assert [n for n, _ in expected] == ["a100-01", "a100-02"]
    assert sum(g for _, g in expected) == 5
    path = _dump(real_slurm, tmp_path, "sacct-format-all-P.txt", "ALL")
    with connect(tmp_path / "ledger.duckdb") as con:
        if order == "scontrol-first":
            assert scontrol_ingest.import_scontrol_file(con, real_slurm.scontrol_snapshot
                                                        ).rejects == ()
        assert slurm_ingest.import_sacct_file(con, path).rejects == ()
        loaded = con.execute("SELECT node, gpus, gpus_source FROM slurm_node_allocations "
                             "WHERE job_id = ? ORDER BY node", [job]).fetchall()
        assert loaded == [("a100-01", 3, "even_split"), ("a100-02", 2, "even_split")]
        if order == "sacct-first":
            assert scontrol_ingest.import_scontrol_file(con, real_slurm.scontrol_snapshot
                                                        ).rejects == ()
        table = _compare_with_sreport(con, real_slurm)
        rows = con.execute("SELECT node, gpus, gpu_seconds, evidence FROM allocations "
                           "WHERE job_id = ? ORDER BY node", [job]).fetchall()
        seconds = con.execute("SELECT date_diff('second', start, \"end\") FROM slurm_runs "
                              "WHERE job_id = ?", [job]).fetchone()[0]
    assert [(n, g) for n, g, _, _ in rows] == expected
    assert [s for _, _, s, _ in rows] == [g * seconds for _, g in expected]
    assert all("GPUs per node from scontrol" in e for *_, e in rows)
    _assert_equal_to_sreport(table)
