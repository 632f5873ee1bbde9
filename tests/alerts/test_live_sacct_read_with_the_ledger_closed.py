"""A site whose Slurm is live (``mode = "sacct"`` behind a login-node prefix) gets the same
alerts as the dump, and sacct answers while the tick holds no ledger connection: the "login
node" opens the ledger read-write from its own process first (DuckDB allows one writing
process), then prints the world's sacct dump (the shape of tests/fixtures/real_slurm/)."""

import sys
from dataclasses import replace
from pathlib import Path

from gpuledger.alerts.run import run_alerts
from gpuledger.site import load_site
from tests.alerts.helpers_ticks import Recorder, world_site
from tests.alerts.helpers_world import at


def test_live_sacct_gives_the_dump_s_alerts(tmp_path: Path) -> None:
    folder = tmp_path / "world"
    site = world_site(folder)
    dump_alerts = Recorder()
    run_alerts(site, at(61), dry_run=True, deliver=dump_alerts)

    live = tmp_path / "live"
    probes = live / "probes"
    script = live / "login-node"
    live.mkdir()
    script.write_text(f"""#!/bin/sh
{sys.executable} -c "import duckdb, sys; duckdb.connect(sys.argv[1]).close()" {live}/ledger.duckdb \
  || exit 9
echo "$1" >> {probes}
case "$1" in
  *sacct*) cat {folder / 'sacct.txt'} ;;
  *) exit 2 ;;
esac
""")
    script.chmod(0o755)
    table = (f'[gpuledger.clusters.hybrid.slurm]\nmode = "sacct"\nprefix = "{script}"\n'
             "timeout_s = 30\n")
    site_live = world_site(live)
    text = site_live.path.read_text().replace(
        '[gpuledger.clusters.hybrid.slurm]\nmode = "dump"\ndump = "sacct.txt"\n', table)
    site_live.path.write_text(text)
    reloaded = load_site(site_live.path)
    reloaded = replace(reloaded, alerts=site_live.alerts)
    live_alerts = Recorder()
    report = run_alerts(reloaded, at(61), dry_run=True, deliver=live_alerts)
    assert live_alerts.workloads() == dump_alerts.workloads()
    assert sorted(s.alert.workload for s in report.sent) == [
        "job 5001 (train-5001)", "pod research/train-0"]
    [call] = probes.read_text().splitlines()  # one sacct call, for the lookback window
    assert "--starttime=2026-01-12T06:31:00" in call
    assert "--endtime=2026-01-12T09:31:01" in call
