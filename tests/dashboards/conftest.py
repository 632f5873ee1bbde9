"""Ledgers of the committed sample world, built once per test session: by the CLI at once
(``sample_ledger``, the page tests) and by Dagster day by day as `make demo` does
(``demo_ledger``), and in reverse day order (``demo_ledger_reversed``)."""

from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.site import load_site
from gpuledger.site.days import accounted_days

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"


@pytest.fixture(scope="session")
def sample_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The writer's ledger file; the pages read its published snapshot."""
    db = tmp_path_factory.mktemp("sample_ledger") / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(SAMPLE)]) == 0
    assert main(["--db", str(db), "build"]) == 0
    return db


def materialize_sample_world(tmp_path_factory: pytest.TempPathFactory, name: str, *,
                             reverse: bool = False) -> Path:
    """What `make demo` runs (pipelines/materialize.py), into a ledger of its own; the days'
    partitions in reverse order when ``reverse``. The environment is patched only meanwhile."""
    home = tmp_path_factory.mktemp(f"{name}_dagster_home")
    db = tmp_path_factory.mktemp(name) / "gpuledger.duckdb"
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    from pipelines.materialize import materialize_all

    keys = [d.isoformat() for d in accounted_days(load_site(SAMPLE / "gpuledger.toml"))]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(home))
        patch.setenv("GPULEDGER_DB", str(db))
        patch.setenv("GPULEDGER_CONFIG", str(SAMPLE / "gpuledger.toml"))  # Dagster's site file
        assert materialize_all(keys[::-1] if reverse else keys)
    return db


@pytest.fixture(scope="session")
def demo_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return materialize_sample_world(tmp_path_factory, "demo")


@pytest.fixture(scope="session")
def demo_ledger_reversed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return materialize_sample_world(tmp_path_factory, "demo_reversed", reverse=True)
