"""``gpuledger simulate`` arguments; the lead's ``gpuledger/cli.py`` mounts them as a subcommand:

    p_sim = sub.add_parser("simulate", help=...); add_arguments(p_sim)
    ...
    return run_from_args(args)
"""

import argparse
import sys
from datetime import date
from pathlib import Path

from gpuledger.simulate.config import DEFAULT_START, LABEL_STYLES, NodeCounts, SimConfig
from gpuledger.simulate.engine import simulate

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


def _start(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        msg = f"expected a date YYYY-MM-DD, found {text!r}"
        raise argparse.ArgumentTypeError(msg) from exc


def _nodes(text: str) -> NodeCounts:
    try:
        return NodeCounts.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--days", type=int, default=7, help="window length in days (default 7)")
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument("--start", type=_start, default=DEFAULT_START,
                        help=f"first UTC day of the window (default {DEFAULT_START}, a Monday)")
    parser.add_argument("--nodes", type=_nodes, default=NodeCounts(),
                        help="pool sizes, e.g. hpc=1000,k8s=200,shared=50 "
                             f"(default {NodeCounts().describe()})")
    parser.add_argument("--step", type=int, default=60,
                        help="Prometheus scrape interval in seconds, dividing 3600 (default 60)")
    parser.add_argument("--no-metrics", action="store_true",
                        help="skip the OpenMetrics file (and the per-GPU busy truth)")
    parser.add_argument("--gzip-metrics", action="store_true",
                        help="write prometheus/metrics.om.gz instead of metrics.om")
    parser.add_argument("--gzip", action="store_true",
                        help="gzip every large output (name + .gz): metrics, sacct dumps, "
                             "Workload snapshot, truth/allocations.csv")
    parser.add_argument("--dcgm-label-style", choices=LABEL_STYLES, default="drift",
                        help="pod: workload labels pod/namespace/container; exported: "
                             "exported_pod/...; drift (default): switch mid-window on the "
                             "Kubernetes nodes")
    parser.add_argument("--no-irregularities", action="store_true",
                        help="no exporter outage, Kueue restart or label drift")
    parser.add_argument("--load", type=float, default=0.7,
                        help="offered load as a share of GPU capacity (default 0.7)")
    parser.add_argument("--scontrol-every", type=int, default=SimConfig.scontrol_every,
                        help="seconds between `scontrol show job -d` snapshots in slurm/, "
                             f"dividing 86400; 0: none (default {SimConfig.scontrol_every})")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def config_from_args(args: argparse.Namespace) -> SimConfig:
    return SimConfig(
        seed=args.seed, days=args.days, start=args.start, nodes=args.nodes,
        step_seconds=args.step, metrics=not args.no_metrics, gzip_metrics=args.gzip_metrics,
        gzip_all=args.gzip, dcgm_label_style=args.dcgm_label_style,
        irregularities=not args.no_irregularities, load=args.load,
        scontrol_every=args.scontrol_every,
    )


def run_from_args(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"gpuledger simulate: {exc}", file=sys.stderr)
        return EXIT_USAGE

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[simulate] {message}", file=sys.stderr, flush=True)

    try:
        simulate(config, Path(args.out), progress)
    except OSError as exc:
        print(f"gpuledger simulate: expected a writable output folder {args.out}, found {exc}",
              file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpuledger simulate",
                                     description="Write a simulated hybrid GPU cluster.")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))
