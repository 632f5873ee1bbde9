"""Suite-wide rules.

With ``GPULEDGER_REQUIRE_SERVICES=1`` (set by ``.ci/run``) a run in which the tests that need the
real Slurm, Prometheus or Spark were skipped, deselected or absent fails: CI runs as root on Debian,
where those services can always be installed.
"""

import os

import pytest

SERVICE_MARKERS = ("slurm", "prometheus", "spark")

# the real standalone Spark cluster (fixture spark_master) for every test that asks for it
pytest_plugins = ("tests.spark_cluster",)

# The caller's settings never leak into the tests: each test names its own ledger, site and
# sources (a GPULEDGER_DB in the environment would override every test's site file).
for _setting in ("GPULEDGER_DB", "GPULEDGER_CONFIG", "GPULEDGER_REPORTS", "GPULEDGER_REPORTS_DIR",
                 "GPULEDGER_SACCT_PREFIX", "GPULEDGER_PROMETHEUS_URL", "GPULEDGER_IDENTITY_MAP",
                 "GPULEDGER_RATE_CARD", "GPULEDGER_GPU_RESOURCES"):
    os.environ.pop(_setting, None)

try:  # the property-based fuzz (tests/connectors/slurm/test_sacct_fuzz.py, PyPI hypothesis)
    from hypothesis import settings as hypothesis_settings
except ImportError:  # pragma: no cover - hypothesis is in the dev extra
    pass
else:
    # the same examples on every run (CI is deterministic), no example database written into
    # the tree, no per-example deadline on a shared machine; HYPOTHESIS_PROFILE=explore searches
    # with fresh random examples
    hypothesis_settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                                         print_blob=True)
    hypothesis_settings.register_profile("explore", database=None, deadline=None,
                                         print_blob=True)
    hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# marker -> outcomes of the tests carrying it, collected during the session.
_OUTCOMES: dict[str, list[str]] = {m: [] for m in SERVICE_MARKERS}


def _require_services() -> bool:
    return os.environ.get("GPULEDGER_REQUIRE_SERVICES") == "1"


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                   items: list[pytest.Item]) -> None:
    """Tests that add jobs to the real Slurm run last: the others compare the job set of
    tests/services/slurm/submit-jobs.sh with sreport, which a later job would not match."""
    items.sort(key=lambda item: item.get_closest_marker("submits_slurm_jobs") is not None)


def pytest_sessionstart(session: pytest.Session) -> None:
    for seen in _OUTCOMES.values():
        seen.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for marker in SERVICE_MARKERS:
        if marker in report.keywords and (report.when == "call" or report.skipped):
            _OUTCOMES[marker].append(report.outcome)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _require_services() or session.config.option.collectonly:
        return
    problems = []
    for marker in SERVICE_MARKERS:
        seen = _OUTCOMES[marker]
        if not seen:
            problems.append(f"no test marked {marker!r} ran")
        elif "skipped" in seen:
            problems.append(f"{seen.count('skipped')} test(s) marked {marker!r} were skipped")
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                "GPULEDGER_REQUIRE_SERVICES=1: " + "; ".join(problems), red=True, bold=True
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# Conservation (docs/accounting.md): on every ledger the suite built, each node-hour's states add
# up to its capacity and the invoices' GPU-seconds equal what the sweep holds. Checked once, on
# every ledger file left under the session's temporary folder, when the session ends.
PHYSICS = ("states", "invoice", "gpu_states", "gpu_unaccounted")


def conservation_breaks(path: "os.PathLike[str]") -> list[tuple]:
    """The node-hours of the ledger file ``path`` that break conservation's physics ([] when the
    file is no ledger, is unreadable or has no conservation table)."""
    from datetime import date

    import duckdb

    from models import load_sql

    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return []
    try:
        if con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name IN "
                       "('gpu_conservation_hourly', 'gpu_conservation_gpu_hourly', 'incidents')"
                       ).fetchone()[0] < 3:
            return []  # no ledger, or one an older release wrote
    except duckdb.Error:
        con.close()
        return []
    try:
        sql = load_sql("gpu_conservation_hourly_check")
        rows = con.execute(f"SELECT * FROM ({sql}) WHERE problem IN {PHYSICS}",
                           {"first_day": date(1970, 1, 1), "end_day": date(9999, 1, 1),
                            "tolerance_s": 0})
        return rows.fetchall()
    except duckdb.Error as exc:  # the check itself failed on a ledger of this release
        return [("check failed", str(exc)[:300])]
    finally:
        con.close()


@pytest.fixture(scope="session", autouse=True)
def every_built_ledger_conserves_gpu_seconds(tmp_path_factory: pytest.TempPathFactory):
    yield
    broken = {}
    for path in sorted(tmp_path_factory.getbasetemp().rglob("*.duckdb")):
        if path.name.endswith(".serving.duckdb"):
            continue  # a published copy of a ledger checked itself
        rows = conservation_breaks(path)
        if rows:
            broken[str(path)] = rows[:3]
    assert not broken, f"conservation breaks on {len(broken)} ledger(s): {broken}"
