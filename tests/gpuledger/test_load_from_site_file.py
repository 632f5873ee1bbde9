"""`gpuledger load` reads what the site file names, from wherever the site folder is.

The sample world's site file is copied with its data to a new folder; `load` then `build` give
the ledger `load-world sample_data` gave before the site file existed. The figures below were
measured with `gpuledger load-world sample_data && gpuledger build` at commit 9a4c69a (the last
load-world that read world.json and the simulator's file names).
"""

import shutil
from pathlib import Path

import pytest

from gpuledger.cli import main
from models.runner import read_snapshot
from tests.helpers import TINY_WORLD

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"

# (domain, allocation rows, GPU-seconds) and the invoice, from load-world at 9a4c69a, from the
# site's first_day: the build starts there (#28, as Dagster's partitions do); at 9a4c69a it also
# charged the 2026-01-04 pieces of 11 Slurm runs that ran into the first day (353,688 GPU-s)
LOAD_WORLD_ALLOCATIONS = [("kubernetes", 757, 14_516_756), ("slurm", 518, 18_491_274)]
LOAD_WORLD_CHARGEBACK = (33, 33_008_030, "31901.59")
LOAD_WORLD_INCIDENTS = [("double_scheduled", 4), ("idle_allocation", 5), ("partial_gang", 4)]


@pytest.fixture(scope="module")
def moved_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample world's site folder somewhere else, loaded and built (its own db path)."""
    root = tmp_path_factory.mktemp("moved")
    site = root / "elsewhere" / "site"
    shutil.copytree(SAMPLE, site, ignore=shutil.ignore_patterns("world.json", "truth"))
    config = site / "gpuledger.toml"
    assert main(["--config", str(config), "load"]) == 0
    assert main(["--config", str(config), "build"]) == 0
    return site


def test_load_from_a_moved_site_gives_load_world_s_ledger(moved_site: Path):
    db = moved_site.parent / "data" / "gpuledger.duckdb"  # db = "../data/…" in the site file
    assert db.is_file()
    with read_snapshot(db) as con:
        allocations = con.sql("SELECT domain, count(*), sum(gpu_seconds)::BIGINT "
                              "FROM allocations GROUP BY ALL ORDER BY 1").fetchall()
        count, seconds, amount = con.sql("SELECT count(*), sum(gpu_seconds)::BIGINT, "
                                         "sum(amount) FROM chargeback").fetchone()
        incidents = con.sql("SELECT kind, count(*) FROM incidents GROUP BY ALL "
                            "ORDER BY 1").fetchall()
    assert allocations == LOAD_WORLD_ALLOCATIONS
    assert (count, seconds, str(amount)) == LOAD_WORLD_CHARGEBACK
    assert incidents == LOAD_WORLD_INCIDENTS


def test_every_file_loaded_is_the_moved_copy_s(moved_site: Path):
    db = moved_site.parent / "data" / "gpuledger.duckdb"
    with read_snapshot(db) as con:
        paths = [p for (p,) in con.sql("SELECT path FROM source_files").fetchall()]
        snapshots = con.sql("SELECT count(DISTINCT observed_at) FROM slurm_gpu_indices"
                            ).fetchone()[0]
    assert paths, "expected the loaded files in source_files, found none"
    assert all(p.startswith(str(moved_site.resolve())) for p in paths), paths
    assert not any(str(SAMPLE) in p for p in paths)
    # every `scontrol show job -d` snapshot of the folder the site file names
    assert snapshots == len(list((moved_site / "slurm").glob("scontrol-*.txt"))) > 0


def test_load_world_is_load_of_the_folder_s_site_file(tmp_path: Path, capsys):
    db = tmp_path / "l.duckdb"
    assert main(["--db", str(db), "load-world", str(TINY_WORLD)]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == ("gpuledger load-world: deprecated, use `gpuledger load "
                                   f"--config {TINY_WORLD / 'gpuledger.toml'}`")
    assert main(["--db", str(db), "sql", "SELECT count(*) FROM slurm_runs"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "18"


def test_load_world_without_a_site_file_says_so(tmp_path: Path, capsys):
    shutil.copytree(TINY_WORLD, tmp_path / "w", ignore=shutil.ignore_patterns("gpuledger.toml"))
    assert main(["--db", str(tmp_path / "l.duckdb"), "load-world", str(tmp_path / "w")]) == 1
    err = capsys.readouterr().err
    assert f"expected a site file {tmp_path / 'w' / 'gpuledger.toml'}" in err
    assert "found none" in err


def test_load_without_a_site_file_is_an_error(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPULEDGER_CONFIG", raising=False)
    assert main(["--db", str(tmp_path / "l.duckdb"), "load"]) == 1
    assert "expected a site file for `load`" in capsys.readouterr().err


def test_load_names_the_live_sources_it_leaves_to_ingest(tmp_path: Path, capsys):
    site = tmp_path / "w"
    shutil.copytree(TINY_WORLD, site)
    config = site / "gpuledger.toml"
    config.write_text(config.read_text(encoding="utf-8") + (
        '\n[gpuledger.clusters.live.slurm]\nprefix = "ssh login"\n'
        '\n[gpuledger.clusters.live.prometheus]\nurl = "http://prometheus:9090"\n'
        'selector = \'cluster="live"\'\n'), encoding="utf-8")
    db = tmp_path / "l.duckdb"
    assert main(["--db", str(db), "--config", str(config), "load"]) == 0
    err = capsys.readouterr().err
    assert "[6/7] loading sacct (gpuledger)" in err
    assert "live: live source not loaded by `load`: slurm (sacct): gpuledger ingest slurm" in err
    assert ("live: live source not loaded by `load`: prometheus (http://prometheus:9090): "
            "gpuledger ingest kubernetes") in err
    assert main(["--db", str(db), "--config", str(config), "load", "--cluster", "nope"]) == 1
    assert "expected a cluster named 'nope', found ['gpuledger', 'live']" in \
        capsys.readouterr().err
