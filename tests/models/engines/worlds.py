"""Simulated worlds built on one engine: ``gpuledger load-world``, then the steps of
``gpuledger build`` (gpuledger/cli/__init__.py ``cmd_build``) with the heavy ones on the engine
given."""

import json
import shutil
from datetime import date, datetime, timedelta
from pathlib import Path

from gpuledger.cli import main
from models import build
from models.engines import Engine
from models.incidents import build_incidents
from models.kueue_quota import build_kueue_quota
from models.quality import build_data_quality
from models.runner import connect
from simulator import SimConfig, simulate


def loaded_world(config: SimConfig, folder: Path) -> tuple[Path, date, date]:
    """``config`` simulated and loaded into ``folder/loaded.duckdb`` (nothing built yet); the
    ledger and the world's first and last day."""
    world = folder / "world"
    simulate(config, world)
    db = folder / "loaded.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    window = json.loads((world / "world.json").read_text())["window"]
    first = datetime.fromisoformat(window["start"]).date()
    last = datetime.fromisoformat(window["end"]).date() - timedelta(days=1)
    return db, first, last


def build_copy(loaded: Path, target: Path, first: date, last: date, engine: Engine) -> Path:
    """A copy of the loaded ledger built day range ``first`` .. ``last`` on ``engine``."""
    shutil.copyfile(loaded, target)
    with connect(target) as con:
        build.begin_build(con, first, last)
        build.build_allocations(con, first, last)
        build.build_gpu_usage_hourly(con, first, last, engine=engine)
        build_data_quality(con, first, last, None)
        build.build_chargeback(con, first, last)
        build_kueue_quota(con, first, last)
        build_incidents(con, first, last, engine=engine)
        build.finish_build(con, first, last)
    return target
