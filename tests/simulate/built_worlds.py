"""Simulated worlds loaded and built once per test module (``gpuledger load-world`` and
``build`` over the world's window), and the small readers their end-to-end tests share."""

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from gpuledger.cli import main
from models.runner import read_snapshot
from simulator import SimConfig, simulate

Built = tuple[Path, Path, dict]  # (world folder, ledger, world.json)


def world_builder(tmp_path_factory: pytest.TempPathFactory,
                  worlds: Mapping[str, SimConfig]) -> Callable[[str], Built]:
    """name -> (world folder, ledger, world.json): each world simulated and built on first use."""
    built: dict[str, Built] = {}

    def get(name: str) -> Built:
        if name not in built:
            world = tmp_path_factory.mktemp(name) / "world"
            simulate(worlds[name], world)
            db = world.parent / "ledger.duckdb"
            w = json.loads((world / "world.json").read_text())
            assert main(["--db", str(db), "load-world", str(world)]) == 0
            assert main(["--db", str(db), "build", "--start", w["window"]["start"],
                         "--end", w["window"]["end"]]) == 0
            built[name] = (world, db, w)
        return built[name]

    return get


def ledger_frame(db: Path, query: str, params: dict | None = None) -> pl.DataFrame:
    """A query on the published ledger, as a Polars frame."""
    with read_snapshot(db) as con:
        return con.execute(query, params or {}).pl()


def iso(text: str) -> datetime:
    """world.json's UTC times (``…Z``) as naive UTC."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


def truth_allocations(world: Path, w: dict) -> pl.DataFrame:
    """truth/allocations.csv clipped to the window."""
    w0, w1 = iso(w["window"]["start"]), iso(w["window"]["end"])
    rows = pl.read_csv(world / "truth" / "allocations.csv", try_parse_dates=True)
    return rows.with_columns(pl.col("start").clip(w0, w1), pl.col("end").clip(w0, w1)).filter(
        pl.col("end") > pl.col("start"))
