"""Daily partition keys covered by a world's window: `python -m gpuledger.partitions DIR`.

Prints ``--partition YYYY-MM-DD`` arguments for `python -m pipelines.materialize`.
"""

import sys
from datetime import date, datetime, timedelta
from pathlib import Path

from gpuledger.service import read_world


def window_days(world: dict[str, object]) -> list[date]:
    """UTC days touched by the world's half-open window ``[start, end)``."""
    window = world.get("window", world)
    if not isinstance(window, dict) or "start" not in window or "end" not in window:
        msg = f"expected world.json with window start and end, found keys {sorted(world)}"
        raise ValueError(msg)
    start = datetime.fromisoformat(str(window["start"]).replace("Z", "+00:00"))
    end = datetime.fromisoformat(str(window["end"]).replace("Z", "+00:00"))
    days = []
    day = start.date()
    while datetime.combine(day, datetime.min.time(), start.tzinfo) < end:
        days.append(day)
        day += timedelta(days=1)
    return days


def main() -> int:
    world_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "sample_data")
    print(" ".join(f"--partition {d.isoformat()}" for d in window_days(read_world(world_dir))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
