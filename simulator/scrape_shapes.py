"""How the exporters' series look once a real Prometheus stored them: scrape target labels,
honorLabels, node names as Kubernetes registers them, and dcgm-exporter's naming variants.

The defaults reproduce exactly what the simulator always wrote (a static scrape config with
``job``/``instance`` only, short node names, current dcgm-exporter names). The options follow
issue #12 and docs/simulator-shapes.md; each fact's source is named where it is used.
"""

from dataclasses import dataclass

from simulator.config import NODE_DOMAIN, SimConfig
from simulator.dra import dcgm_labels as dra_labels
from simulator.records import Holder
from simulator.rng import digest_hex, pod_suffix
from simulator.world import GPU_MODEL_NAMES, Node

KSM_TARGET = 'job="kube-state-metrics",instance="10.42.0.5:8080"'
KUEUE_TARGET = 'job="kueue-controller-manager",instance="10.42.0.9:8443"'
# Labels a ServiceMonitor's target carries besides job/instance (prometheus-operator): without
# honorLabels a scraped label of the same name is kept as exported_<name> (Prometheus
# scrape.mutateSampleLabels), the plain one then names the exporter's own pod.
CLASHING = ("container", "namespace", "pod")

FAMILY_HELP = {
    "util": "GPU utilization (in %).",
    "ratio": "Ratio of time the graphics engine is active.",
}


@dataclass(frozen=True)
class DcgmNaming:
    """Metric and label names of one dcgm-exporter generation."""

    util: str  # the GPU_UTIL family (0..100)
    ratio: str | None  # the GR_ENGINE_ACTIVE family (0..1); 1.x has none
    uuid: str  # label holding the GPU UUID
    model_name: bool  # whether a modelName label exists
    pod_labels: dict[str, str]  # our holder keys -> the exporter's label names


DCGM_NAMINGS = {
    "current": DcgmNaming("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "UUID", True,
                          {"container": "container", "namespace": "namespace", "pod": "pod"}),
    # --use-old-namespace (dcgm-exporter internal/pkg/collector/gpu_collector.go: "uuid";
    # transformation/const.go: pod_name, pod_namespace, container_name; issue #272 shows
    # dcgm_fi_prof_gr_engine_active{gpu,uuid,device,modelName,...,container_name,pod_name,
    # pod_namespace})
    "old-namespace": DcgmNaming("dcgm_fi_dev_gpu_util", "dcgm_fi_prof_gr_engine_active", "uuid",
                                True, {"container": "container_name",
                                       "namespace": "pod_namespace", "pod": "pod_name"}),
    # 1.x (dcgm-exporter#188): dcgm_gpu_utilization{gpu,UUID,device,Hostname,container,
    # namespace,pod}; no modelName, no profiling (DCP) metrics
    "1.x": DcgmNaming("dcgm_gpu_utilization", None, "UUID", False,
                      {"container": "container", "namespace": "namespace", "pod": "pod"}),
}


def _rs_pod(prefix: str, key: str) -> str:
    """A Deployment pod name: <deployment>-<pod-template-hash>-<suffix>."""
    return f"{prefix}-{pod_suffix(0, key, 'rs', length=10)}-{pod_suffix(0, key, 'pod')}"


# The exporters' own pods as a ServiceMonitor's target labels name them (chart defaults:
# prometheus-community kube-state-metrics, NVIDIA gpu-operator dcgm-exporter, Kueue's
# config/prometheus/monitor.yaml).
KSM_POD = ('container="kube-state-metrics",endpoint="http",namespace="monitoring",'
           f'pod="{_rs_pod("kube-state-metrics", "ksm")}",service="kube-state-metrics"')
KUEUE_POD = ('container="manager",endpoint="https",namespace="kueue-system",'
             f'pod="{_rs_pod("kueue-controller-manager", "kueue")}",'
             'service="kueue-controller-manager-metrics-service"')


def unlabelled_nodes(config: SimConfig, nodes: tuple[Node, ...]) -> tuple[str, ...]:
    """The Kubernetes nodes whose dcgm-exporter runs without the kubelet pod-resources
    mapping (``--no-pod-labels-on``): the named ones, or a share chosen from the seed."""
    k8s = [n.name for n in nodes if n.in_kubernetes]
    if config.no_pod_labels_nodes:
        unknown = [n for n in config.no_pod_labels_nodes if n not in k8s]
        if unknown:
            msg = (f"expected --no-pod-labels-on to name Kubernetes nodes ({', '.join(k8s)}), "
                   f"found {', '.join(repr(n) for n in unknown)}")
            raise ValueError(msg)
        return tuple(sorted(set(config.no_pod_labels_nodes)))
    if config.no_pod_labels_share <= 0:
        return ()
    count = max(1, round(config.no_pod_labels_share * len(k8s)))
    ranked = sorted(k8s, key=lambda name: digest_hex(config.seed, "no-pod-labels", name))
    return tuple(sorted(ranked[:count]))


@dataclass(frozen=True)
class ScrapeShapes:
    honor_labels: bool = True
    node_domain: str = ""  # "" = Kubernetes and dcgm-exporter use the short names
    naming: DcgmNaming = DCGM_NAMINGS["current"]
    hostname_label: str = "Hostname"
    unlabelled: frozenset[str] = frozenset()
    fqdn_only: frozenset[str] = frozenset()  # --realistic: only these nodes use the FQDN
    dra_labels: bool = True  # dcgm-exporter --kubernetes-enable-dra (simulator/dra.py)

    @classmethod
    def from_config(cls, config: SimConfig, unlabelled: tuple[str, ...],
                    fqdn_some: tuple[str, ...] = ()) -> "ScrapeShapes":
        mixed = bool(fqdn_some) and not config.fqdn_nodes
        return cls(honor_labels=config.honor_labels,
                   node_domain=NODE_DOMAIN if config.fqdn_nodes or mixed else "",
                   naming=DCGM_NAMINGS[config.dcgm_names],
                   hostname_label=config.dcgm_hostname_label,
                   unlabelled=frozenset(unlabelled),
                   fqdn_only=frozenset(fqdn_some) if mixed else frozenset(),
                   dra_labels=config.dcgm_dra_labels)

    # ------------------------------------------------------------------ names

    def host(self, node: Node) -> str:
        """The node as the kubelet registers it and dcgm-exporter reports its host name."""
        if not self.node_domain or (self.fqdn_only and node.name not in self.fqdn_only):
            return node.name
        return f"{node.name}.{self.node_domain}"

    def dcgm_families(self) -> list[tuple[str, str, str]]:
        out = [(self.naming.util, "gauge", FAMILY_HELP["util"])]
        if self.naming.ratio is not None:
            out.append((self.naming.ratio, "gauge", FAMILY_HELP["ratio"]))
        return out

    # ------------------------------------------------------------------ kube-state-metrics, Kueue

    @property
    def ksm_target(self) -> str:
        return KSM_TARGET if self.honor_labels else f"{KSM_TARGET},{KSM_POD}"

    @property
    def kueue_target(self) -> str:
        return KUEUE_TARGET if self.honor_labels else f"{KUEUE_TARGET},{KUEUE_POD}"

    def _workload(self, name: str) -> str:
        return name if self.honor_labels or name not in CLASHING else f"exported_{name}"

    def pod_key(self, namespace: str, pod: str, uid: str) -> str:
        """A kube-state-metrics pod series' own labels."""
        return (f'{self._workload("namespace")}="{namespace}",{self._workload("pod")}="{pod}",'
                f'uid="{uid}"')

    def container(self, name: str) -> str:
        return f'{self._workload("container")}="{name}"'

    # ------------------------------------------------------------------ dcgm-exporter

    def dcgm_base(self, node: Node) -> list[str]:
        n = self.naming
        model = f',modelName="{GPU_MODEL_NAMES[node.gpu_model]}"' if n.model_name else ""
        host = f',{self.hostname_label}="{self.host(node)}"'
        return [f'gpu="{i}",{n.uuid}="{uuid}",device="nvidia{i}"{model}{host}'
                for i, uuid in enumerate(node.gpu_uuids)]

    def dcgm_target(self, node: Node, exported: bool) -> str:
        if node.pool == "slurm" and not node.slinky:  # no Kubernetes: a static scrape config
            return f'job="dcgm-exporter-hpc",instance="{self.host(node)}:9400"'
        target = f'job="nvidia-dcgm-exporter",instance="{node.host_ip}:9400"'
        if exported:
            suffix = pod_suffix(0, "dcgm-exporter", node.name)
            target += (f',container="nvidia-dcgm-exporter",namespace="gpu-operator",'
                       f'pod="nvidia-dcgm-exporter-{suffix}"')
            if not self.honor_labels:  # a ServiceMonitor target also names service, endpoint
                target += ',endpoint="gpu-metrics",service="nvidia-dcgm-exporter"'
        return target

    def dcgm_workload(self, node: Node, labels: tuple[tuple[str, str], ...], exported: bool,
                      container: str | None = None) -> str:
        """A holder's labels on one GPU's series: renamed for the exporter generation, moved to
        exported_* where they clash with target labels, none from the pod-resources mapping on
        nodes whose exporter runs without it (``hpc_job`` comes from a mapping directory)."""
        parts = []
        for key, value in labels:
            if key == "hpc_job":
                parts.append(f'hpc_job="{value}"')
                continue
            if node.name in self.unlabelled:
                continue
            name = self.naming.pod_labels[key]
            if key == "container" and container is not None:
                value = container
            parts.append(f'{"exported_" + name if exported and name in CLASHING else name}='
                         f'"{value}"')
        return ",".join(parts)

    def holder_series(self, node: Node, i: int, owners: list[Holder], exported: bool,
                      base: str, target: str) -> list[str]:
        """The label sets of GPU ``i``'s series: one per holder. An exporter without the
        pod-resources mapping writes the GPU once, or once per Slurm job its HPC mapping
        names (dcgm-exporter's transformations relabel the GPU's one series per holder)."""
        out: list[str] = []
        for h in owners:
            container = dict(h.dcgm_containers).get(i) if h.dcgm_containers else None
            workload = self.dcgm_workload(node, h.dcgm, exported, container)
            if h.dra_claim is not None:  # a DRA GPU (simulator/dra.py)
                workload = (f"{workload},{dra_labels(h.dra_claim, self.host(node), i)}"
                            if self.dra_labels and workload else "")
            labels = f"{base},{workload},{target}" if workload else f"{base},{target}"
            if labels not in out:
                out.append(labels)
        if len(out) > 1:  # a bare series only where no holder is named
            bare = f"{base},{target}"
            out = [x for x in out if x != bare] or out
        return out
