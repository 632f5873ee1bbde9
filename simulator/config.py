"""What a simulated world is made of: the run's configuration and its validation.

Everything the simulator writes follows from a ``SimConfig``: the same config gives byte-identical
files (no wall clock, no dict/set-order dependence).
"""

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

DEFAULT_START = date(2026, 1, 5)  # a Monday, so seven days make one complete ISO week
DAY = 86_400
HOUR = 3_600
MINUTE = 60

LABEL_STYLES = ("pod", "exported", "drift")
# Shapes real clusters expose (issue #12); the first of each is what the simulator always wrote.
KUEUE_LABEL_STYLES = ("legacy", "0.17")
DCGM_NAME_STYLES = ("current", "old-namespace", "1.x")
DCGM_HOSTNAME_LABELS = ("Hostname", "hostname")
SLINKY_MODES = ("statefulset", "daemonset")  # slurm-operator NodeSet scalingMode
NODE_DOMAIN = "cluster.example.org"  # --fqdn-nodes: Kubernetes and dcgm-exporter add it
_NODES_RE = re.compile(r"^\s*(hpc|k8s|shared)\s*=\s*(\d+)\s*$")


@dataclass(frozen=True)
class NodeCounts:
    """How many nodes each pool has: Slurm-only, Kubernetes-only and shared between both."""

    hpc: int = 6
    k8s: int = 4
    shared: int = 2

    @classmethod
    def parse(cls, text: str) -> "NodeCounts":
        """``hpc=1000,k8s=200,shared=50``; pools not named keep their default."""
        values = {"hpc": cls.hpc, "k8s": cls.k8s, "shared": cls.shared}
        for part in text.split(","):
            if not part.strip():
                continue
            match = _NODES_RE.match(part)
            if match is None:
                msg = f"expected pool=count with pool in hpc, k8s, shared, found {part.strip()!r}"
                raise ValueError(msg)
            values[match.group(1)] = int(match.group(2))
        return cls(**values)

    def describe(self) -> str:
        return f"hpc={self.hpc},k8s={self.k8s},shared={self.shared}"


@dataclass(frozen=True)
class SimConfig:
    """One simulated world. ``step_seconds`` is the Prometheus scrape interval;
    ``scontrol_every`` the period of the ``scontrol show job -d`` snapshots (0: none)."""

    seed: int = 1
    days: int = 7
    start: date = DEFAULT_START
    nodes: NodeCounts = field(default_factory=NodeCounts)
    step_seconds: int = 60
    metrics: bool = True
    gzip_metrics: bool = False
    gzip_all: bool = False
    dcgm_label_style: str = "drift"
    irregularities: bool = True
    load: float = 0.7
    cluster: str = "gpulab"
    sacct_timezone: str = "Europe/Berlin"
    scontrol_every: int = 2 * HOUR
    # real-cluster shapes (docs/simulator-shapes.md); the defaults write what was always written
    honor_labels: bool = True
    fqdn_nodes: bool = False
    init_container_gpus: float = 0.0
    kueue_labels: str = "legacy"
    dcgm_names: str = "current"
    dcgm_hostname_label: str = "Hostname"
    no_pod_labels_nodes: tuple[str, ...] = ()
    no_pod_labels_share: float = 0.0
    # the written site file's ledger and reports folder, relative to the world folder
    site_db: str = "data/gpuledger.duckdb"
    site_reports: str = "reports"
    # --realistic (issue #15, docs/simulator-shapes.md): messy utilization, gaps, skew, mixed
    # host names, garbage-collected Workloads, many planted incidents and decoys; off by default
    realistic: bool = False
    kueue_snapshot_every: int = 0  # seconds between kueue/snapshots/ files (0: none)
    # --shared-gpus (issue #16): MIG, time-slicing and shard nodes, truth in physical fractions
    shared_gpus: bool = False
    # --slinky-nodes (issue #27 item 8): the last N (or a share) of the Slurm-only nodes run
    # inside Kubernetes, each held by a slurm-operator slurmd pod (simulator/slinky.py)
    slinky_nodes: int = 0
    slinky_share: float = 0.0
    slinky_mode: str = "statefulset"
    # --autodetect-gpu-types: Slurm GRES types as AutoDetect=nvml names them (autodetect.py)
    autodetect_gpu_types: bool = False
    # --dra-pods SHARE (issue #27 item 8, simulator/dra.py): a share of the Kubernetes GPU
    # workloads get their GPUs through DRA ResourceClaims (slurm-bridge pods: the extended-
    # resource path); --no-dcgm-dra-labels: dcgm-exporter without --kubernetes-enable-dra;
    # --dra-snapshot-every: seconds between the dra/ ResourceClaim snapshots
    dra_pods: float = 0.0
    dcgm_dra_labels: bool = True
    dra_snapshot_every: int = 600

    def __post_init__(self) -> None:
        problems = []
        if self.days < 1:
            problems.append(f"expected --days >= 1, found {self.days}")
        if self.step_seconds < 1 or HOUR % self.step_seconds:
            problems.append(
                f"expected --step to divide 3600 (15, 30, 60, 120, 300, 600 ...), "
                f"found {self.step_seconds}"
            )
        if self.scontrol_every < 0 or (self.scontrol_every and DAY % self.scontrol_every):
            problems.append(f"expected --scontrol-every to be 0 or to divide 86400 (3600, "
                            f"7200, 14400 ...), found {self.scontrol_every}")
        for pool in ("hpc", "k8s", "shared"):
            count = getattr(self.nodes, pool)
            if count < 1:
                problems.append(f"expected at least 1 {pool} node, found {count}")
        if self.dcgm_label_style not in LABEL_STYLES:
            problems.append(
                f"expected a DCGM label style in {', '.join(LABEL_STYLES)}, "
                f"found {self.dcgm_label_style!r}"
            )
        if not 0.05 <= self.load <= 0.95:
            problems.append(f"expected --load between 0.05 and 0.95, found {self.load}")
        if self.kueue_snapshot_every < 0 or (self.kueue_snapshot_every
                                               and DAY % self.kueue_snapshot_every):
            problems.append(f"expected --kueue-snapshot-every to be 0 or to divide 1440 minutes "
                            f"(30, 60, 120 ...), found {self.kueue_snapshot_every // 60}")
        problems.extend(self._shape_problems())
        if problems:
            raise ValueError("; ".join(problems))

    def _shape_problems(self) -> list[str]:
        problems = []
        for flag, value, allowed in (
            ("--kueue-labels", self.kueue_labels, KUEUE_LABEL_STYLES),
            ("--dcgm-names", self.dcgm_names, DCGM_NAME_STYLES),
            ("--dcgm-hostname-label", self.dcgm_hostname_label, DCGM_HOSTNAME_LABELS),
        ):
            if value not in allowed:
                problems.append(f"expected {flag} in {', '.join(allowed)}, found {value!r}")
        for flag, share in (("--init-container-gpus", self.init_container_gpus),
                            ("--no-pod-labels-on", self.no_pod_labels_share)):
            if not 0.0 <= share <= 1.0:
                problems.append(f"expected {flag} SHARE between 0 and 1, found {share}")
        if self.no_pod_labels_nodes and self.no_pod_labels_share:
            problems.append("expected --no-pod-labels-on to be node names or a share, found both")
        problems.extend(self._slinky_problems())
        if not 0.0 <= self.dra_pods <= 1.0:
            problems.append(f"expected --dra-pods SHARE between 0 and 1, found {self.dra_pods}")
        if self.dra_snapshot_every < 60 or DAY % self.dra_snapshot_every:
            problems.append(f"expected --dra-snapshot-every to divide 1440 minutes (5, 10, 60 "
                            f"...), found {self.dra_snapshot_every / 60:g}")
        if self.dra_pods and self.dcgm_dra_labels and self.dcgm_names == "1.x":
            problems.append("expected --no-dcgm-dra-labels with --dcgm-names 1.x (dcgm-exporter "
                            "1.x has no --kubernetes-enable-dra), found DRA labels on")
        if not self.honor_labels and self.dcgm_label_style == "pod":
            problems.append("expected --dcgm-label-style exported or drift with "
                            "--no-honor-labels (without honorLabels every scrape of a "
                            "Kubernetes dcgm-exporter has exported_* labels), found 'pod'")
        return problems

    def _slinky_problems(self) -> list[str]:
        problems = []
        if self.slinky_mode not in SLINKY_MODES:
            problems.append(f"expected --slinky-mode in {', '.join(SLINKY_MODES)}, "
                            f"found {self.slinky_mode!r}")
        if self.slinky_nodes < 0 or self.slinky_nodes > self.nodes.hpc:
            problems.append(f"expected --slinky-nodes between 0 and the {self.nodes.hpc} hpc "
                            f"nodes, found {self.slinky_nodes}")
        if not 0.0 <= self.slinky_share <= 1.0:
            problems.append(f"expected --slinky-nodes SHARE between 0 and 1, found "
                            f"{self.slinky_share}")
        if self.slinky_nodes and self.slinky_share:
            problems.append("expected --slinky-nodes to be a count or a share, found both")
        return problems

    @property
    def slinky(self) -> bool:
        """Whether some Slurm nodes run inside Kubernetes (``--slinky-nodes``)."""
        return bool(self.slinky_nodes or self.slinky_share)

    @property
    def dra(self) -> bool:
        """Whether some pods hold GPUs through DRA ResourceClaims (``--dra-pods``)."""
        return self.dra_pods > 0

    @property
    def shapes_changed(self) -> bool:
        """Whether any real-cluster shape option differs from what was always written."""
        return bool(self.shape_options())

    def shape_options(self) -> dict[str, object]:
        """The real-cluster shape options that differ from their defaults (for world.json)."""
        out: dict[str, object] = {}
        for name in ("honor_labels", "fqdn_nodes", "init_container_gpus", "kueue_labels",
                     "dcgm_names", "dcgm_hostname_label", "no_pod_labels_nodes",
                     "no_pod_labels_share"):
            value = getattr(self, name)
            if value != getattr(SimConfig, name):
                out[name] = list(value) if isinstance(value, tuple) else value
        return out

    @property
    def window_start(self) -> int:
        """Epoch seconds of the window's first second (00:00 UTC of ``start``)."""
        return int(datetime(self.start.year, self.start.month, self.start.day,
                            tzinfo=UTC).timestamp())

    @property
    def window_end(self) -> int:
        """Epoch seconds just after the window (half-open ``[start, end)``)."""
        return self.window_start + self.days * DAY

    @property
    def gzip_sacct(self) -> bool:
        return self.gzip_all

    @property
    def gzip_om(self) -> bool:
        return self.gzip_metrics or self.gzip_all
