"""Dumps from sacct's default or a site's own field list: no JobIDRaw (run keys from JobID), no
Cluster (given with --cluster or gpuledger.toml), or too few fields (a clear error)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from connectors.slurm.fields import SACCT_FIELDS
from connectors.slurm.header import SacctFormatError
from connectors.slurm.parse import SacctParse, parse_sacct
from gpuledger.cli import main
from gpuledger.ingest.slurm import run as slurm_ingest
from models.runner import connect
from tests.connectors.slurm.dumps import T0, alloc, dump, step

NO_RAW = tuple(f for f in SACCT_FIELDS if f != "JobIDRaw")
NO_CLUSTER = tuple(f for f in SACCT_FIELDS if f != "Cluster")
NEITHER = tuple(f for f in NO_RAW if f != "Cluster")


def parse(text: str, **kw: object) -> SacctParse:
    r = parse_sacct(text, source_file="d.txt", **kw)
    r.check_counts()
    return r


def _rows() -> list[dict[str, str]]:
    """A plain job, two array tasks (the last reuses the array id), the pending rest of the
    array, a het job's two components, a requeued job's two runs; each with its steps."""
    plain = alloc()
    t0 = alloc(JobID="300_0", JobIDRaw="301")
    t1 = alloc(JobID="300_1", JobIDRaw="300")
    rest = alloc(JobID="300_[2-5%2]", JobIDRaw="300", State="PENDING", Start="Unknown",
                 End="Unknown", ElapsedRaw="0", NodeList="None assigned", AllocTRES="")
    h0 = alloc(JobID="400+0", JobIDRaw="400")
    h1 = alloc(JobID="400+1", JobIDRaw="401", NodeList="a100-02")
    r1 = alloc(JobID="500", JobIDRaw="500", State="REQUEUED", End=str(T0 + 20),
               ElapsedRaw="15")
    r2 = alloc(JobID="500", JobIDRaw="500", Submit=str(T0 + 20), Start=str(T0 + 30),
               Eligible=str(T0 + 25))
    return [plain, step(plain, "batch"), t0, step(t0, "batch"), t1, step(t1, "batch"), rest,
            h0, step(h0, "batch"), h1, step(h1, "0"), r1, step(r1, "batch"), r2,
            step(r2, "batch")]


def test_run_keys_without_jobidraw_come_from_the_jobid():
    r = parse(dump(_rows(), NO_RAW))
    assert r.rejects == []
    got = r.runs.select("job_id", "job_id_raw", "run_key").rows()
    assert got == [
        ("100", 100, f"gpulab:100:{T0}"),
        ("300_0", None, f"gpulab:300_0:{T0}"),
        ("300_1", None, f"gpulab:300_1:{T0}"),
        ("300_[2-5%2]", None, f"gpulab:300_[2-5%2]:{T0}"),
        ("400+0", None, f"gpulab:400+0:{T0}"),
        ("400+1", None, f"gpulab:400+1:{T0}"),
        ("500", 500, f"gpulab:500:{T0}"),
        ("500", 500, f"gpulab:500:{T0 + 20}"),
    ]
    # array and het parts are still read from the JobID
    assert r.runs.filter(pl.col("job_id") == "300_1").select(
        "array_job_id", "array_task_id").row(0) == (300, 1)
    assert r.runs.filter(pl.col("job_id") == "400+1").select(
        "het_job_id", "het_offset").row(0) == (400, 1)
    # each step belongs to its own run, the requeued job's steps to their run
    assert r.steps.select("step_job_id", "run_key").rows() == [
        ("100.batch", f"gpulab:100:{T0}"), ("300_0.batch", f"gpulab:300_0:{T0}"),
        ("300_1.batch", f"gpulab:300_1:{T0}"), ("400+0.batch", f"gpulab:400+0:{T0}"),
        ("400+1.0", f"gpulab:400+1:{T0}"), ("500.batch", f"gpulab:500:{T0}"),
        ("500.batch", f"gpulab:500:{T0 + 20}"),
    ]


def test_plain_jobs_key_alike_with_and_without_jobidraw():
    with_raw = parse(dump(_rows()))
    without = parse(dump(_rows(), NO_RAW))
    plain = pl.col("job_id").str.contains(r"^\d+$")
    assert with_raw.runs.filter(plain)["run_key"].to_list() == \
        without.runs.filter(plain)["run_key"].to_list()
    cols = ["job_id", "submit", "start", "end", "alloc_gpus", "nodes"]
    assert with_raw.runs.select(cols).equals(without.runs.select(cols))


def test_a_dump_without_cluster_needs_a_cluster_name():
    with pytest.raises(SacctFormatError) as exc:
        parse_sacct(dump([alloc()], NO_CLUSTER), source_file="d.txt")
    msg = str(exc.value)
    assert msg.startswith("d.txt: expected Cluster in the header")
    assert "found none" in msg
    assert "--cluster NAME" in msg
    assert "gpuledger.toml" in msg
    r = parse(dump(_rows(), NEITHER), cluster="siteA")
    assert r.rejects == []
    assert set(r.runs["cluster"]) == set(r.steps["cluster"]) == {"siteA"}
    assert r.runs["run_key"][0] == f"siteA:100:{T0}"


def test_a_given_cluster_rejects_rows_of_another_cluster():
    rows = [alloc(), alloc(JobID="101", JobIDRaw="101", Cluster="other")]
    r = parse(dump(rows), cluster="gpulab")
    assert r.runs["job_id"].to_list() == ["100"]
    [rej] = r.rejects
    assert (rej.source_file, rej.line_no, rej.field) == ("d.txt", 3, "Cluster")
    assert rej.reason == ("expected each row's Cluster to be the cluster given with --cluster, "
                          "found 'other' where 'gpulab' was given")


@pytest.mark.parametrize("bad", ["", "two words"])
def test_a_cluster_name_must_be_one_word(bad: str):
    with pytest.raises(ValueError, match="expected a cluster name without spaces"):
        parse_sacct(dump([alloc()], NO_CLUSTER), source_file="d.txt", cluster=bad)


@pytest.mark.parametrize(("fields", "missing"), [
    (("JobID", "JobName", "Partition", "Account", "AllocCPUS", "State", "ExitCode"),
     "Submit, Start, End, NodeList, AllocTRES"),
    (("JobIDRaw", "State", "Submit", "Start", "End", "NodeList", "AllocTRES"), "JobID"),
    (("JobID", "State", "Submit", "Start", "End", "NodeList", "ReqTRES"), "AllocTRES"),
])
def test_too_few_fields_name_exactly_which_are_missing(fields: tuple[str, ...], missing: str):
    with pytest.raises(SacctFormatError) as exc:
        parse_sacct(dump([alloc()], fields, sep="|"), source_file="d.txt", cluster="c")
    assert str(exc.value).startswith(f"d.txt: expected {missing} in the header (GPU-seconds "
                                     "need JobID, State, Submit, Start, End, NodeList, "
                                     "AllocTRES and Cluster), found none;")


def test_streamed_and_whole_loads_agree_without_jobidraw(tmp_path: Path, monkeypatch):
    path = tmp_path / "d.txt"
    path.write_text(dump(_rows() * 1, NEITHER), encoding="utf-8")
    parsed = parse_sacct(path, source_file=str(path), cluster="c")
    with connect(tmp_path / "a.duckdb") as con:
        load = slurm_ingest.import_sacct_file(con, path, cluster="c")
        streamed = con.execute("SELECT run_key FROM slurm_runs ORDER BY run_key").fetchall()
        steps = con.execute("SELECT step_job_id, run_key FROM slurm_steps "
                            "ORDER BY step_job_id, run_key").fetchall()
    assert (load.runs, load.steps, load.rejects) == (8, 7, ())
    assert streamed == sorted((k,) for k in parsed.runs["run_key"])
    assert steps == sorted(parsed.steps.select("step_job_id", "run_key").rows())


def test_loading_a_run_under_both_key_forms_charges_it_once(tmp_path: Path):
    """A dump with JobIDRaw keys an array task by its id, one without by its JobID text; the
    later load replaces the earlier rows of the same run (cluster, JobID, Submit, Start)."""
    with_raw, without = tmp_path / "with.txt", tmp_path / "without.txt"
    with_raw.write_text(dump(_rows()), encoding="utf-8")
    without.write_text(dump(_rows(), NO_RAW), encoding="utf-8")

    def state(con) -> tuple[list, int, int]:
        runs = con.execute("SELECT job_id, run_key FROM slurm_runs ORDER BY job_id, submit"
                           ).fetchall()
        nodes = con.execute("SELECT count(*) FROM slurm_node_allocations").fetchone()[0]
        gpu_s = con.execute("SELECT sum(alloc_gpus * date_diff('second', start, \"end\")) "
                            "FROM slurm_runs").fetchone()[0]
        return runs, nodes, gpu_s

    for first, second in ((with_raw, without), (without, with_raw)):
        with connect(tmp_path / f"{first.stem}.duckdb") as con:
            slurm_ingest.import_sacct_file(con, first)
            runs1, nodes1, gpus1 = state(con)
            slurm_ingest.import_sacct_file(con, second)
            runs2, nodes2, gpus2 = state(con)
            assert (len(runs2), nodes2, gpus2) == (len(runs1), nodes1, gpus1) == (8, 7, 350)
            keys = dict(runs2)
            assert keys["300_0"] == (f"gpulab:300_0:{T0}" if second == without
                                     else f"gpulab:301:{T0}")


def test_cli_import_sacct_takes_the_cluster(tmp_path: Path, capsys):
    path = tmp_path / "site.txt"
    path.write_text(dump(_rows(), NEITHER, sep="|"), encoding="utf-8")
    db = tmp_path / "l.duckdb"
    assert main(["--db", str(db), "import-sacct", str(path)]) == 1
    err = capsys.readouterr().err
    assert "expected Cluster in the header" in err
    assert "--cluster NAME" in err
    assert main(["--db", str(db), "import-sacct", str(path), "--cluster", "siteB"]) == 0
    assert "8 runs, 7 steps" in capsys.readouterr().err
    assert main(["--db", str(db), "sql", "SELECT DISTINCT cluster FROM slurm_runs"]) == 0
    assert capsys.readouterr().out.splitlines() == ["cluster", "siteB"]


def test_cli_import_sacct_takes_the_cluster_from_the_config_file(tmp_path: Path, capsys,
                                                                  monkeypatch):
    path = tmp_path / "site.txt"
    path.write_text(dump(_rows(), NEITHER, sep="|"), encoding="utf-8")
    config = tmp_path / "gpuledger.toml"
    config.write_text('[gpuledger]\ncluster = "siteC"\n', encoding="utf-8")
    db = tmp_path / "l.duckdb"
    assert main(["--db", str(db), "--config", str(config), "import-sacct", str(path)]) == 0
    capsys.readouterr()
    assert main(["--db", str(db), "sql", "SELECT DISTINCT cluster FROM slurm_runs"]) == 0
    assert capsys.readouterr().out.splitlines() == ["cluster", "siteC"]
