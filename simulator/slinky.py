"""``--slinky-nodes N|SHARE`` and ``--slinky-mode``: Slurm nodes run inside Kubernetes by
SlinkyProject/slurm-operator (issue #27 item 8; docs/accounting.md "Slurm inside Kubernetes").

The last N of the Slurm-only nodes (``gpu-hpc-*``; a share: at least one) become Kubernetes
nodes, each held whole by one slurmd pod of the NodeSet for the window; Slurm keeps placing its
jobs there exactly as before (the job stream is the same), under the Slurm node name. Shapes as
slurm-operator makes them (SlinkyProject/slurm-operator f2ed3fc5, 2026-08-20):

* NodeSet ``slurm-worker-slinky`` in namespace ``slurm`` (helm/slurm
  ``templates/nodeset/_helpers.tpl`` ``slurm.worker.name`` = ``<release>-worker``, NodeSet
  ``<worker>-<key>``; ``nodeset-cr.yaml`` sets the pod template hostname ``<key>-``).
* StatefulSet mode: pod ``slurm-worker-slinky-<ordinal>`` (``GetOrdinalPodName``), hostname and
  Slurm node name ``slinky-<ordinal>`` (``initIdentity``: template hostname + ordinal,
  ``ordinalPadding: 0``; ``GetSlurmNodeName``). DaemonSet mode: pod
  ``slurm-worker-slinky-<5 characters>`` (``GenerateName``), hostname and Slurm node name the
  Kubernetes node's name cut at its first dot (``GetDaemonSetPodHostname``).
* Pod labels (``internal/builder/labels/labels.go`` ``WithWorkerLabels``;
  ``api/v1beta1/well_known.go``; ``internal/controller/nodeset/utils/utils.go``
  ``UpdateIdentity``/``initIdentity``): ``app.kubernetes.io/name=slurmd``,
  ``app.kubernetes.io/instance=<nodeset>``, ``app.kubernetes.io/component=worker``,
  ``slinky.slurm.net/cluster=<controller>``, ``nodeset.slinky.slurm.net/pod-name``,
  ``pod-hostname`` (the Slurm node name), ``scaling-mode``, and in StatefulSet mode
  ``pod-index``. kube-state-metrics exports them in ``kube_pod_labels`` (as every pod label of
  the simulator: ``--metric-labels-allowlist=pods=[*]``). Owner: the NodeSet (controller).
  Container ``slurmd`` (``workerbuilder/worker_app.go``).
* ``scontrol show node``: ``Comment={"namespace":"slurm","podName":"…","node":"…"}``
  (``docs/usage/topology.md``).
* DCGM job mapping (``helm/slurm/_vendor/nvidia/dcgm``: the prolog writes ``$SLURM_JOB_ID``
  into ``<jobMappingDir>/<index>`` for each GPU of ``SLURM_JOB_GPUS``): dcgm-exporter labels a
  GPU a job holds with the slurmd pod (the kubelet pod-resources API) and ``hpc_job``; a GPU no
  job holds with the slurmd pod only.

Truth: the jobs are charged to their Slurm owners as on any Slurm node; the slurmd pod is a
``truth/allocations.csv`` row with ``charged`` false (outcome ``slurm_agent``), charged nothing.
"""

import json
from dataclasses import dataclass, replace

from simulator.config import SimConfig
from simulator.identity import PodOwner
from simulator.records import Holder, PodRecord, Profile
from simulator.rng import k8s_uid, pod_suffix
from simulator.world import Node, World

NAMESPACE = "slurm"
CONTROLLER = "slurm"  # the Controller CR (slinky.slurm.net/cluster)
NODESET = "slurm-worker-slinky"
HOSTNAME_PREFIX = "slinky-"
CONTAINER = "slurmd"
SERVICE_ACCOUNT = "default"
SCALING_MODES = {"statefulset": "StatefulSet", "daemonset": "DaemonSet"}
STARTED_BEFORE = 60  # the pod is created this long before the window, Running from its start


def slinky_count(config: SimConfig) -> int:
    """How many Slurm-only nodes run inside Kubernetes."""
    if config.slinky_nodes:
        return config.slinky_nodes
    if config.slinky_share:
        return max(1, round(config.slinky_share * config.nodes.hpc))
    return 0


def with_slinky_nodes(config: SimConfig, nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    """``nodes`` with the last Slurm-only ones marked as Slinky nodes (ordinals by name)."""
    hpc = [n.name for n in nodes if n.pool == "slurm"]
    count = slinky_count(config)
    chosen = sorted(hpc[len(hpc) - count:]) if count else []
    stateful = config.slinky_mode == "statefulset"
    names = {name: f"{HOSTNAME_PREFIX}{k}" if stateful else "" for k, name in enumerate(chosen)}
    return tuple(replace(n, slinky=True, slurm_name=names[n.name]) if n.name in names else n
                 for n in nodes)


@dataclass(frozen=True)
class SlinkyAgent:
    """The slurmd pod holding one Slinky node's GPUs."""

    node: Node
    ordinal: int
    pod: str
    uid: str
    mode: str  # StatefulSet | DaemonSet

    @property
    def slurm_node(self) -> str:
        return self.node.slurm_node

    def ksm_labels(self) -> tuple[tuple[str, str], ...]:
        """The pod's labels as kube-state-metrics names them (``label_<name>``, sorted)."""
        labels = {
            "app_kubernetes_io_component": "worker",
            "app_kubernetes_io_instance": NODESET,
            "app_kubernetes_io_name": "slurmd",
            "nodeset_slinky_slurm_net_pod_hostname": self.slurm_node,
            "nodeset_slinky_slurm_net_pod_name": self.pod,
            "nodeset_slinky_slurm_net_scaling_mode": self.mode,
            "slinky_slurm_net_cluster": CONTROLLER,
        }
        if self.mode == "StatefulSet":
            labels["nodeset_slinky_slurm_net_pod_index"] = str(self.ordinal)
        return tuple(sorted(labels.items()))

    @property
    def dcgm(self) -> tuple[tuple[str, str], ...]:
        """The workload labels dcgm-exporter's pod-resources mapping gives the node's GPUs."""
        return (("container", CONTAINER), ("namespace", NAMESPACE), ("pod", self.pod))

    def comment(self, k8s_node: str) -> str:
        """``scontrol show node`` ``Comment=`` (the Kubernetes node as it is registered)."""
        return json.dumps({"namespace": NAMESPACE, "podName": self.pod, "node": k8s_node},
                          separators=(",", ":"))


def agents(world: World) -> tuple[SlinkyAgent, ...]:
    cfg = world.config
    mode = SCALING_MODES[cfg.slinky_mode]
    out = []
    for k, node in enumerate(sorted((n for n in world.nodes if n.slinky), key=lambda n: n.name)):
        pod = (f"{NODESET}-{k}" if mode == "StatefulSet"
               else f"{NODESET}-{pod_suffix(cfg.seed, 'slinky', node.name)}")
        out.append(SlinkyAgent(node, k, pod, k8s_uid(cfg.seed, "slinky", NAMESPACE, pod), mode))
    return tuple(out)


def pod_record(agent: SlinkyAgent, w0: int) -> PodRecord:
    """The slurmd pod as kube-state-metrics sees it: Running from the window's start (the file
    has no scrape before it, as ``--shared-gpus`` pods running at the start), never ending."""
    return PodRecord(
        namespace=NAMESPACE, name=agent.pod, uid=agent.uid, container=CONTAINER,
        owner_kind="NodeSet", owner_name=NODESET, service_account=SERVICE_ACCOUNT,
        labels=agent.ksm_labels(), gpus=agent.node.gpu_count, node=agent.node,
        created=w0 - STARTED_BEFORE, scheduled=w0 - STARTED_BEFORE // 2, running=w0,
        finished=None, final_phase="", deleted=None, pod_number=0)


def truth_holder(agent: SlinkyAgent, w0: int, w1: int) -> Holder:
    """The slurmd pod's row of truth/allocations.csv: held every GPU, charged nothing."""
    node = agent.node
    return Holder(
        domain="kubernetes", source_key=f"{NAMESPACE}/{agent.pod}", name=agent.pod, node=node,
        gpu_indices=tuple(range(node.gpu_count)), start=w0, end=w1,
        owner=PodOwner(NAMESPACE, SERVICE_ACCOUNT, agent.ksm_labels(), "", ""),
        outcome="slurm_agent", charged=False, profile=Profile("idle", 0), view="kubernetes",
        dcgm=())


def with_agent_labels(h: Holder, by_node: dict[str, SlinkyAgent]) -> Holder:
    """A Slurm job on a Slinky node: dcgm-exporter names the slurmd pod next to ``hpc_job``."""
    agent = by_node.get(h.node.name)
    if agent is None or h.domain != "slurm" or not h.dcgm:
        return h
    return replace(h, dcgm=(*agent.dcgm, *h.dcgm))


def world_block(cfg: SimConfig, found: tuple[SlinkyAgent, ...],
                hosts: dict[str, str]) -> dict[str, object]:
    """world.json ``slinky``: the Slurm nodes inside Kubernetes and their slurmd pods."""
    return {
        "options": {"slinky_nodes": cfg.slinky_nodes, "slinky_share": cfg.slinky_share,
                    "slinky_mode": cfg.slinky_mode},
        "nodeset": {"namespace": NAMESPACE, "name": NODESET, "controller": CONTROLLER,
                    "scaling_mode": SCALING_MODES[cfg.slinky_mode],
                    "hostname_prefix": HOSTNAME_PREFIX if cfg.slinky_mode == "statefulset"
                    else None, "container": CONTAINER},
        "nodes": [{"kubernetes_node": hosts[a.node.name], "node": a.node.name,
                   "slurm_node": a.slurm_node, "pod": f"{NAMESPACE}/{a.pod}", "uid": a.uid,
                   "gpus": a.node.gpu_count,
                   "labels": dict(a.ksm_labels())} for a in found],
        "dcgm": "GPUs a job holds: the slurmd pod's container/namespace/pod and hpc_job on one "
                "series (slurm-operator DCGM job mapping); others: the slurmd pod's labels",
        "truth": "jobs charged to their Slurm owners on the Kubernetes node; the slurmd pod is "
                 "an allocations.csv row charged false (outcome slurm_agent); its GPU-time "
                 "no job holds is infrastructure, charged to nobody",
        "scontrol_show_node": "slurm/show-node.txt: Comment={\"namespace\":…,\"podName\":…,"
                              "\"node\":…}",
    }
