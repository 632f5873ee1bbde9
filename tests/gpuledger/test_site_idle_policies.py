"""The site file's idle policies ([gpuledger.idle], [[gpuledger.idle.policy]]): read strictly,
errors naming the key, and `gpuledger build` applying them (flags over the file)."""

from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from gpuledger.site import SiteError, load_site
from models.incidents import IdlePolicy
from models.runner import ensure_schema

BASE = """\
[gpuledger]
first_day = "2026-01-05"
db = "ledger.duckdb"

[gpuledger.clusters.a.slurm]
mode = "dump"
dump = "sacct.txt"
"""

POLICIES = BASE + """
[gpuledger.idle]
zero_minutes = 45
window_minutes = 120

[[gpuledger.idle.policy]]
cluster = "a"
namespace = "notebooks"
zero_minutes = 90
efficiency_threshold = 0

[[gpuledger.idle.policy]]
partition = "debug"
zero_threshold = 0.02
"""


def _site(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gpuledger.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_and_policies_are_read_policies_inheriting_the_defaults(tmp_path: Path):
    assert load_site(_site(tmp_path, BASE)).idle is None  # the detectors' defaults
    rules = load_site(_site(tmp_path, POLICIES)).idle
    assert rules is not None
    assert rules.default == IdlePolicy(zero_minutes=45, window_minutes=120)
    notebooks, debug = rules.policies
    assert (notebooks.cluster, notebooks.namespace, notebooks.zero_minutes,
            notebooks.window_minutes, notebooks.efficiency_threshold) == (
        "a", "notebooks", 90, 120, 0)
    assert (debug.partition, debug.zero_threshold, debug.zero_minutes) == ("debug", 0.02, 45)


@pytest.mark.parametrize(("extra", "message"), [
    ("[gpuledger.idle]\nzero_minutes = 0\n",
     "[gpuledger.idle.zero_minutes]: expected a number above 0, found 0.0"),
    ("[gpuledger.idle]\nzero_threshold = 5\n",
     "[gpuledger.idle.zero_threshold]: expected a busy fraction between 0 and 1"),
    ("[gpuledger.idle]\nzero_mins = 30\n", "found 'zero_mins'"),
    ("[gpuledger.idle]\nwindow_minutes = \"2h\"\n",
     "[gpuledger.idle.window_minutes]: expected a number, found '2h'"),
    ("[[gpuledger.idle.policy]]\ncluster = \"b\"\n",
     "[gpuledger.idle.policy[0].cluster]: expected one of the site's clusters ['a'], found 'b'"),
    ("[[gpuledger.idle.policy]]\npartition = \"p\"\nnamespace = \"n\"\n",
     "[gpuledger.idle.policy[0].namespace]: expected a partition (Slurm) or a namespace"),
    ("[[gpuledger.idle.policy]]\nzero_minutes = 10\n",
     "[gpuledger.idle.policy[0].cluster]: expected at least one of cluster, partition"),
    ("[[gpuledger.idle.policy]]\nnamespace = \"n\"\nthreshold = 0.1\n", "found 'threshold'"),
])
def test_a_bad_idle_table_names_the_key(tmp_path: Path, extra: str, message: str):
    with pytest.raises(SiteError) as err:
        load_site(_site(tmp_path, BASE + "\n" + extra))
    assert message in str(err.value)
    assert str(tmp_path / "gpuledger.toml") in str(err.value)


def _ledger(db: Path) -> None:
    """A pod at 0 % for 40 minutes: idle under 30 minutes, not under the site's 45."""
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        start = datetime(2026, 1, 5, 9)
        end = start + timedelta(hours=2)
        con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, "
                    "node, gpu_model, gpus, start_ts, end_ts, gpu_seconds, k8s_namespace) VALUES "
                    "(?, 'kubernetes', 'a', 'u1', 'wl', 'pod-u1', 'n1', 'a100', 1, ?, ?, 7200, "
                    "'ns')", [start.date(), start, end])
        # what `build` rebuilds the ledger's row from
        con.execute("INSERT INTO k8s_pod_allocations (cluster, namespace, pod, uid, node, gpus, "
                    "start_ts, end_ts, scrape_interval_s) VALUES ('a', 'ns', 'pod-u1', 'u1', "
                    "'n1', 1, ?, ?, 60)", [start, end])
        con.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, node, gpu_index, "
                        "bucket_start, busy_fraction, samples, namespace, pod) VALUES "
                        "('a', 'GPU-0', 'n1', 0, ?, ?, 1, 'ns', 'pod-u1')",
                        [(start + timedelta(minutes=m), 0.0 if m < 40 else 0.6)
                         for m in range(120)])


def _idle_count(db: Path) -> int:
    with duckdb.connect(str(db)) as con:
        return con.execute("SELECT count(*) FROM incidents "
                           "WHERE kind = 'idle_allocation'").fetchone()[0]


def test_build_reads_the_policies_and_flags_override_them(tmp_path: Path):
    site = _site(tmp_path, POLICIES)
    db = tmp_path / "ledger.duckdb"
    _ledger(db)
    build = ["--db", str(db), "--config", str(site), "build", "--start", "2026-01-05",
             "--end", "2026-01-06"]
    assert main(build) == 0
    assert _idle_count(db) == 0  # zero_minutes = 45 in the site file
    assert main([*build, "--idle-min-minutes", "30"]) == 0
    assert _idle_count(db) == 1
