"""``make bench`` entry: ``python -m benchmarks.run [NAME ...] [-- BENCHMARK OPTIONS]``.

Without a name every benchmark runs. Options after the names (``--repeat 5``, ``--lines N`` …)
are passed to each benchmark selected; ``python -m benchmarks.run NAME --help`` lists them.
"""

from __future__ import annotations

import importlib
import sys

#: name -> module (each has ``main(argv) -> int``).
BENCHMARKS: dict[str, str] = {
    "sacct_ingest": "benchmarks.sacct_ingest",
    "prometheus_read": "benchmarks.prometheus_read",
    "detector_quality": "benchmarks.detector_quality",
    "detector_speed": "benchmarks.detector_speed",
    "dashboard_speed": "benchmarks.dashboard_speed",
    "k8s_ingest_memory": "benchmarks.k8s_ingest_memory",
    "engine_scale": "benchmarks.engine_scale",
    "publish_cost": "benchmarks.publish_cost",
    "conservation_cost": "benchmarks.conservation_cost",
    "openmetrics_scale": "benchmarks.openmetrics_scale",
    "backup_cost": "benchmarks.backup_cost",
    "neighbour_rebuild": "benchmarks.neighbour_rebuild",
}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in {"-h", "--help"}:
        print(__doc__)
        print("benchmarks:", ", ".join(BENCHMARKS))
        return 0
    names: list[str] = []
    while args and not args[0].startswith("-"):
        names.append(args.pop(0))
    if args and args[0] == "--":
        args.pop(0)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"expected a benchmark name among {', '.join(BENCHMARKS)}, found "
              f"{', '.join(unknown)}", file=sys.stderr)
        return 2
    status = 0
    for name in names or list(BENCHMARKS):
        module = importlib.import_module(BENCHMARKS[name])
        status = max(status, module.main(args))
    return status


if __name__ == "__main__":
    sys.exit(main())
