"""``python -m simulator`` arguments (``add_arguments``) and their run (``run_from_args``)."""

import argparse
import sys
from datetime import date
from pathlib import Path

from simulator.config import (
    DCGM_HOSTNAME_LABELS,
    DCGM_NAME_STYLES,
    DEFAULT_START,
    KUEUE_LABEL_STYLES,
    LABEL_STYLES,
    SLINKY_MODES,
    NodeCounts,
    SimConfig,
)
from simulator.engine import simulate
from simulator.scrape_shapes import unlabelled_nodes
from simulator.world import build_nodes

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
REALISTIC_SNAPSHOT_MINUTES = 60  # a Workload history sensor polling hourly
REALISTIC_NO_POD_LABELS_SHARE = 0.25  # dcgm-exporters without the pod-resources mapping


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


# --real-shapes: every real-cluster shape at once, with moderate shares (explicit flags win)
REAL_SHAPES: dict[str, object] = {
    "honor_labels": False, "fqdn_nodes": True, "init_container_gpus": 0.3,
    "kueue_labels": "0.17", "dcgm_names": "old-namespace", "dcgm_hostname_label": "hostname",
    "no_pod_labels_share": 0.25,
}


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        msg = f"expected a share between 0 and 1, found {text!r}"
        raise argparse.ArgumentTypeError(msg) from exc
    if not 0.0 <= value <= 1.0:
        msg = f"expected a share between 0 and 1, found {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _nodes_or_share(text: str) -> tuple[str, ...] | float:
    """``gpu-k8s-01,gpu-shr-02`` or a share such as ``0.25``."""
    try:
        return _share(text)
    except argparse.ArgumentTypeError:
        if text.strip() and text.strip()[0].isdigit():
            raise
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        msg = f"expected node names (gpu-k8s-01,gpu-shr-02) or a share, found {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return names


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """The shapes real clusters expose (issue #12; docs/simulator-shapes.md); all off by
    default, so existing worlds stay byte-identical."""
    group = parser.add_argument_group("real-cluster shapes")
    group.add_argument("--no-honor-labels", action="store_true",
                       help="write every KSM, dcgm-exporter and Kueue series as Prometheus "
                            "stores it from a ServiceMonitor without honorLabels (workload "
                            "labels as exported_*, plain ones naming the exporter pod)")
    group.add_argument("--fqdn-nodes", action="store_true",
                       help="Kubernetes node names and dcgm-exporter's host name are FQDNs "
                            "(gpu-k8s-01.cluster.example.org); Slurm and nodes.csv keep "
                            "short names")
    group.add_argument("--init-container-gpus", type=_share, default=None, metavar="SHARE",
                       help="share of GPU pod templates whose GPUs an init container requests "
                            "(alone, or next to a GPU sidecar and main container)")
    group.add_argument("--kueue-labels", choices=KUEUE_LABEL_STYLES, default=None,
                       help="pod queue labels: legacy (default, kueue.x-k8s.io/queue-name) or "
                            "0.17 (local-queue-name and cluster-queue-name)")
    group.add_argument("--dcgm-names", choices=DCGM_NAME_STYLES, default=None,
                       help="dcgm-exporter names: current (default), old-namespace "
                            "(--use-old-namespace), 1.x (dcgm_gpu_utilization)")
    group.add_argument("--dcgm-hostname-label", choices=DCGM_HOSTNAME_LABELS, default=None,
                       help="dcgm-exporter's host name label (default Hostname; newer "
                            "releases: hostname)")
    group.add_argument("--no-pod-labels-on", type=_nodes_or_share, default=None,
                       metavar="NODES|SHARE",
                       help="dcgm-exporter on these Kubernetes nodes (comma-separated, or a "
                            "share of them) runs without the kubelet pod-resources mapping")
    group.add_argument("--real-shapes", action="store_true",
                       help="all of the above at once with moderate shares (explicit options "
                            "win): " + ", ".join(f"{k}={v}" for k, v in REAL_SHAPES.items()))


def shape_settings(args: argparse.Namespace) -> dict[str, object]:
    """SimConfig fields from the shape options (``--real-shapes`` fills what is not given)."""
    out: dict[str, object] = dict(REAL_SHAPES) if args.real_shapes else {}
    if args.no_honor_labels:
        out["honor_labels"] = False
    if args.fqdn_nodes:
        out["fqdn_nodes"] = True
    for name in ("init_container_gpus", "kueue_labels", "dcgm_names", "dcgm_hostname_label"):
        if getattr(args, name) is not None:
            out[name] = getattr(args, name)
    where = args.no_pod_labels_on
    if isinstance(where, tuple):
        out["no_pod_labels_nodes"] = where
        out.pop("no_pod_labels_share", None)
    elif where is not None:
        out["no_pod_labels_share"] = where
    return out


def _count_or_share(text: str) -> int | float:
    """``2`` (nodes) or ``0.25`` (a share)."""
    if "." not in text:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0:
            msg = f"expected a node count (2) or a share (0.25), found {text!r}"
            raise argparse.ArgumentTypeError(msg)
        return value
    return _share(text)


def add_slurm_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """Slurm estates of issue #27 item 8 (docs/simulator-shapes.md); all off by default."""
    group = parser.add_argument_group("Slurm inside Kubernetes, GPU type names")
    group.add_argument("--slinky-nodes", type=_count_or_share, default=None, metavar="N|SHARE",
                       help="the last N (or a share) of the hpc nodes run inside Kubernetes, "
                            "each held by a Slinky slurm-operator slurmd pod")
    group.add_argument("--slinky-mode", choices=SLINKY_MODES, default=None,
                       help="the NodeSet's scaling mode: statefulset (default; Slurm nodes "
                            "slinky-0 …) or daemonset (Slurm nodes named as the Kubernetes "
                            "nodes)")
    group.add_argument("--autodetect-gpu-types", action="store_true",
                       help="Slurm GRES types as AutoDetect=nvml names them "
                            "(nvidia_h100_80gb_hbm3, nvidia_h100_80gb_hbm3_3g.40gb)")


def add_dra_arguments(parser: argparse.ArgumentParser) -> None:
    """DRA (issue #27 item 8; docs/simulator-shapes.md "DRA"); off by default."""
    group = parser.add_argument_group("Dynamic Resource Allocation (DRA)")
    group.add_argument("--dra-pods", type=_share, default=None, metavar="SHARE",
                       help="share of the Kubernetes GPU workloads whose pods get their GPUs "
                            "through ResourceClaims of dra-driver-nvidia-gpu (gpu.nvidia.com) "
                            "instead of the nvidia.com/gpu device plugin: no GPU request in "
                            "kube-state-metrics, kube_pod_resourceclaim_info instead, the "
                            "claims in dra/ snapshots; slurm-bridge pods of that share take the "
                            "extended-resource path (deviceclass.resource.kubernetes.io/"
                            "gpu.nvidia.com)")
    group.add_argument("--dcgm-dra-labels", action=argparse.BooleanOptionalAction,
                       default=None,
                       help="whether dcgm-exporter runs with --kubernetes-enable-dra (default: "
                            "yes; the DRA GPUs' series then carry the pod and dra_* labels; "
                            "without it they carry no pod labels)")
    group.add_argument("--dra-snapshot-every", type=int, default=None, metavar="MINUTES",
                       help="minutes between the kubectl get "
                            "resourceclaims,resourceslices,pods snapshots in "
                            f"dra/ (default {SimConfig.dra_snapshot_every // 60})")


def dra_settings(args: argparse.Namespace) -> dict[str, object]:
    out: dict[str, object] = {}
    if args.dra_pods is not None:
        out["dra_pods"] = args.dra_pods
    if args.dcgm_dra_labels is not None:
        out["dcgm_dra_labels"] = args.dcgm_dra_labels
    if args.dra_snapshot_every is not None:
        out["dra_snapshot_every"] = args.dra_snapshot_every * 60
    return out


def slurm_shape_settings(args: argparse.Namespace) -> dict[str, object]:
    out: dict[str, object] = {}
    if isinstance(args.slinky_nodes, float):
        out["slinky_share"] = args.slinky_nodes
    elif args.slinky_nodes is not None:
        out["slinky_nodes"] = args.slinky_nodes
    if args.slinky_mode is not None:
        out["slinky_mode"] = args.slinky_mode
    if args.autodetect_gpu_types:
        out["autodetect_gpu_types"] = True
    return out


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
    parser.add_argument("--site-db", default=SimConfig.site_db,
                        help="the ledger the written gpuledger.toml names, relative to the "
                             f"world folder (default {SimConfig.site_db})")
    parser.add_argument("--site-reports", default=SimConfig.site_reports,
                        help="the reports folder the written gpuledger.toml names, relative "
                             f"to the world folder (default {SimConfig.site_reports})")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--realistic", action="store_true",
                        help="a messy cluster (issue #15): realistic utilization profiles, "
                             "exporter gaps, clock skew, mixed FQDN/short host names, Workloads "
                             "deleted 10 min after their Job, >= 20 planted incidents and >= 10 "
                             "decoys per kind on the benchmark size (docs/simulator-shapes.md)")
    parser.add_argument("--kueue-snapshot-every", type=int, default=None, metavar="MINUTES",
                        help="minutes between kubectl Workload snapshots in kueue/snapshots/ "
                             f"(default {REALISTIC_SNAPSHOT_MINUTES} with --realistic, else 0: "
                             "none)")
    parser.add_argument("--shared-gpus", action="store_true",
                        help="add MIG, time-slicing and shard nodes in both schedulers, with "
                             "truth in physical fractions (issue #16; docs/simulator-shapes.md)")
    add_shape_arguments(parser)
    add_slurm_shape_arguments(parser)
    add_dra_arguments(parser)


def realistic_settings(args: argparse.Namespace) -> dict[str, object]:
    """SimConfig fields of ``--realistic`` (some nodes' exporters without pod labels, unless
    the shape options say otherwise) and of ``--kueue-snapshot-every``."""
    out: dict[str, object] = {}
    if args.realistic:
        out["realistic"] = True
    if args.shared_gpus:
        out["shared_gpus"] = True
    minutes = args.kueue_snapshot_every
    if minutes is None:
        minutes = REALISTIC_SNAPSHOT_MINUTES if args.realistic else 0
    if minutes:
        out["kueue_snapshot_every"] = minutes * 60
    return out


def config_from_args(args: argparse.Namespace) -> SimConfig:
    shapes = shape_settings(args)
    if args.realistic and args.no_pod_labels_on is None and not args.real_shapes:
        shapes["no_pod_labels_share"] = REALISTIC_NO_POD_LABELS_SHARE
    return SimConfig(
        seed=args.seed, days=args.days, start=args.start, nodes=args.nodes,
        step_seconds=args.step, metrics=not args.no_metrics, gzip_metrics=args.gzip_metrics,
        gzip_all=args.gzip, dcgm_label_style=args.dcgm_label_style,
        irregularities=not args.no_irregularities, load=args.load,
        scontrol_every=args.scontrol_every, site_db=args.site_db,
        site_reports=args.site_reports, **shapes,  # type: ignore[arg-type]
        **realistic_settings(args),  # type: ignore[arg-type]
        **slurm_shape_settings(args),  # type: ignore[arg-type]
        **dra_settings(args),  # type: ignore[arg-type]
    )


def run_from_args(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        unlabelled_nodes(config, build_nodes(config))  # node names the world does not have
    except ValueError as exc:
        print(f"python -m simulator: {exc}", file=sys.stderr)
        return EXIT_USAGE

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"[simulate] {message}", file=sys.stderr, flush=True)

    try:
        simulate(config, Path(args.out), progress)
    except OSError as exc:
        print(f"python -m simulator: expected a writable output folder {args.out}, found {exc}",
              file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator",
                                     description="Write a simulated hybrid GPU cluster.")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))
