"""Every simulated world carries its own site file, ``<world>/gpuledger.toml``, that
``gpuledger.site.load_site`` accepts and that names exactly the files the simulator wrote."""

import json
from datetime import date, datetime
from pathlib import Path

from gpuledger.site import Site, load_site
from simulator.cli_args import main


def _named_files(site: Site) -> list[Path]:
    cluster = site.clusters[0]
    slurm, prom, kueue = cluster.slurm, cluster.prometheus, cluster.kueue
    assert slurm is not None
    assert kueue is not None
    named = [site.reference.nodes, site.reference.accounts, site.reference.identity_map,
             site.reference.rate_card, slurm.dump, slurm.sreport_utilization,
             slurm.sreport_accounts, kueue.snapshot]
    if prom is not None:
        named.append(prom.openmetrics)
    return [p for p in named if p is not None]


def test_the_default_world_site_file_names_its_window_cluster_and_files(world_dir: Path):
    site = load_site(world_dir / "gpuledger.toml")
    world = json.loads((world_dir / "world.json").read_text(encoding="utf-8"))
    assert site.first_day == date.fromisoformat(world["window"]["start"][:10])
    assert [c.name for c in site.clusters] == [world["cluster"]]
    cluster = site.clusters[0]
    assert cluster.slurm is not None
    assert cluster.prometheus is not None
    assert cluster.slurm.mode == "dump"
    assert cluster.slurm.dump == world_dir / "sacct" / "sacct-unitsep-epoch.txt"
    assert cluster.slurm.dump_timezone == "UTC"
    end = datetime.fromisoformat(world["window"]["end"].replace("Z", ""))
    assert cluster.slurm.dump_as_of == end
    assert cluster.slurm.scontrol_snapshots == world_dir / "slurm"
    assert any((world_dir / "slurm").glob("scontrol-*.txt"))
    assert cluster.prometheus.openmetrics == world_dir / "prometheus" / "metrics.om"
    assert cluster.prometheus.url == ""
    for path in _named_files(site):
        assert path.is_file(), f"the site file names {path}, which the simulator did not write"
    assert site.db == world_dir / "data" / "gpuledger.duckdb"
    assert site.reports_dir == world_dir / "reports"
    assert site.schedules.enabled is False
    assert "gpuledger.toml" in world["summary"]["files"]


def test_gzip_worlds_without_metrics_or_snapshots_name_only_what_exists(tmp_path: Path):
    out = tmp_path / "world"
    assert main(["--seed", "3", "--days", "1", "--nodes", "hpc=1,k8s=1,shared=1", "--step",
                 "600", "--gzip", "--no-metrics", "--scontrol-every", "0", "--start",
                 "2026-02-02", "--quiet", "--out", str(out)]) == 0
    site = load_site(out / "gpuledger.toml")
    cluster = site.clusters[0]
    assert cluster.prometheus is None  # no metrics written: no [prometheus] table
    assert cluster.slurm is not None
    assert cluster.kueue is not None
    assert cluster.slurm.scontrol_snapshots is None
    assert cluster.slurm.dump == out / "sacct" / "sacct-unitsep-epoch.txt.gz"
    assert cluster.kueue.snapshot == out / "kueue" / "workloads.json.gz"
    assert site.first_day == date(2026, 2, 2)
    assert cluster.slurm.dump_as_of == datetime(2026, 2, 3)
    for path in _named_files(site):
        assert path.is_file(), f"the site file names {path}, which the simulator did not write"


def test_site_db_and_reports_options_are_written_and_recorded(tmp_path: Path):
    out = tmp_path / "world"
    assert main(["--seed", "3", "--days", "1", "--nodes", "hpc=1,k8s=1,shared=1", "--step",
                 "600", "--gzip-metrics", "--quiet", "--out", str(out),
                 "--site-db", "../data/gpuledger.duckdb", "--site-reports", "../reports"]) == 0
    site = load_site(out / "gpuledger.toml")
    assert site.db == out / ".." / "data" / "gpuledger.duckdb"
    assert site.reports_dir == out / ".." / "reports"
    prom = site.clusters[0].prometheus
    assert prom is not None
    assert prom.openmetrics == out / "prometheus" / "metrics.om.gz"
    command = json.loads((out / "world.json").read_text(encoding="utf-8"))["command"]
    assert command.startswith("python -m simulator ")
    assert "--site-db ../data/gpuledger.duckdb --site-reports ../reports" in command


def test_the_tiny_world_fixture_has_a_site_file_for_its_window():
    tiny = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_world"
    site = load_site(tiny / "gpuledger.toml")
    world = json.loads((tiny / "world.json").read_text(encoding="utf-8"))
    assert site.first_day == date.fromisoformat(world["window"]["start"][:10])
    assert [c.name for c in site.clusters] == [world["cluster"]]
    slurm = site.clusters[0].slurm
    assert slurm is not None
    assert slurm.dump_as_of == datetime.fromisoformat(world["window"]["end"].replace("Z", ""))
    for path in _named_files(site):
        assert path.is_file(), f"the tiny world's site file names {path}, which is missing"
