"""Live Slurm sources are read before the ledger is opened: while sacct and sreport answer, another
process can open the ledger for writing (DuckDB allows one writing process, so it could not if
the step held a connection).

The "login node" is a prefix script that first opens the ledger read-write from its own process,
then prints real captures (tests/fixtures/real_slurm/, Slurm 22.05, see its README) for the
command it was given. The ledger's runs then equal what the same capture loads as a dump."""

import sys
from pathlib import Path

import dagster as dg
import duckdb

from tests.helpers import FIXTURES, load_definitions, site_environment

REAL = FIXTURES / "real_slurm"
DAY = "2026-11-30"  # the day of the captures


def _login_node(tmp_path: Path, db: Path, probes: Path) -> Path:
    script = tmp_path / "login-node"
    # "$1" is the whole command, as ssh would get it
    script.write_text(f"""#!/bin/sh
{sys.executable} -c "import duckdb, sys; duckdb.connect(sys.argv[1]).close()" {db} || exit 9
echo opened >> {probes}
case "$1" in
  *sacct*) cat {REAL / 'sacct-unitsep-epoch.txt'} ;;
  *AccountUtilizationByUser*) cat {REAL / 'sreport-account-utilization-by-user-gpu.txt'} ;;
  *utilization*) cat {REAL / 'sreport-cluster-utilization-gpu.txt'} ;;
  *) exit 2 ;;
esac
""", encoding="utf-8")
    script.chmod(0o755)
    return script


def test_sacct_and_sreport_answer_while_the_ledger_is_closed(tmp_path: Path):
    db = tmp_path / "data" / "gpuledger.duckdb"
    db.parent.mkdir()
    probes = tmp_path / "probes.txt"
    site = tmp_path / "gpuledger.toml"
    site.write_text(f"""
[gpuledger]
first_day = "{DAY}"
db = "{db}"
[gpuledger.clusters.gpuledger.slurm]
mode = "sacct"
prefix = "{_login_node(tmp_path, db, probes)}"
timeout_s = 60
""", encoding="utf-8")
    defs = load_definitions(site)
    with site_environment(site):
        result = dg.materialize(
            [*defs.assets, *(defs.asset_checks or [])], resources=defs.resources,
            selection=dg.AssetSelection.assets("slurm_jobs", "slurm_steps", "sreport_gpu"),
            partition_key=DAY)
    assert result.success
    # sacct once, sreport twice: each time the ledger could be opened from outside
    assert probes.read_text(encoding="utf-8").split() == ["opened"] * 3
    meta = {e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata
            for e in result.get_asset_materialization_events()}
    jobs = meta["slurm_jobs"]
    assert jobs["clusters"].value == "gpuledger"
    assert jobs["per_cluster"].value["gpuledger"]["runs"] == jobs["runs"].value > 0
    assert meta["sreport_gpu"]["utilization_rows"].value > 0

    # the same capture imported as a dump gives the same runs
    dump_db = tmp_path / "dump.duckdb"
    from gpuledger.cli import main

    assert main(["--db", str(dump_db), "import-sacct",
                 str(REAL / "sacct-unitsep-epoch.txt")]) == 0
    query = ("SELECT job_id, start, \"end\", alloc_gpus FROM slurm_runs "
             "WHERE start < TIMESTAMP '2026-12-01' ORDER BY ALL")
    with duckdb.connect(str(db), read_only=True) as live, \
            duckdb.connect(str(dump_db), read_only=True) as dump:
        assert live.execute(query).fetchall() == dump.execute(query).fetchall()
