"""A small simulated world shared by the simulator's tests (generated once per session)."""

import csv
from pathlib import Path

import pytest

from simulator import SimConfig, SimSummary, simulate

# two days from Monday 2026-01-05 with a 5-minute scrape interval keeps the suite fast
TEST_CONFIG = SimConfig(seed=7, days=2, step_seconds=300)
TEST_ARGS = ["--seed", "7", "--days", "2", "--step", "300", "--quiet"]


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SimSummary]:
    out = tmp_path_factory.mktemp("simulated") / "world"
    summary = simulate(TEST_CONFIG, out)
    return out, summary


@pytest.fixture(scope="session")
def world_dir(world: tuple[Path, SimSummary]) -> Path:
    return world[0]


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))
