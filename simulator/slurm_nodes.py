"""``slurm/show-node.txt``: ``scontrol -o show node`` for every Slurm node (the suite's real 22.05
shape, tests/fixtures/slurm/sharing/scontrol-o-show-node.txt), written with ``--shared-gpus``,
``--slinky-nodes`` or ``--autodetect-gpu-types`` (not ``scontrol-*.txt``: that glob names the
job snapshots).

* ``Gres=gpu:a100:8``; MIG nodes ``gpu:1g.10gb:29,gpu:1g.20gb:4,…``, shard nodes
  ``gpu:a100:4,shard:32``; with ``--autodetect-gpu-types`` the types AutoDetect=nvml names
  (``gpu:nvidia_a100-sxm4-80gb:8``, ``gpu:nvidia_h100_80gb_hbm3_1g.10gb:29``).
* A Slinky node (``--slinky-nodes``) under its Slurm node name, ``NodeAddr`` the slurmd pod's IP,
  ``NodeHostName`` its hostname, and ``Comment={"namespace":"slurm","podName":…,"node":…}``
  (slurm-operator docs/usage/topology.md; the node as Kubernetes registers it).
"""

from pathlib import Path
from typing import TYPE_CHECKING

from simulator.autodetect import LEGACY, GresNames
from simulator.outputs import open_output
from simulator.scontrol_writer import _mem
from simulator.world import Node, World

if TYPE_CHECKING:
    from simulator.sharing_world import SharedNode
    from simulator.slinky import SlinkyAgent

SHOW_NODE = "slurm/show-node.txt"
BOOTED_BEFORE = 7 * 86_400  # the nodes booted a week before the window


def _gres(node: Node, shared: "SharedNode | None", names: GresNames) -> tuple[str, str]:
    """(``Gres=``, the GRES part of ``CfgTRES=``) of a Slurm node."""
    if shared is None:
        n, model = node.gpu_count, names.whole(node.gpu_model)
        return f"gpu:{model}:{n}", f"gres/gpu={n},gres/gpu:{model}={n}"
    if shared.sharing == "mig":
        profiles = {names.mig(node.gpu_model, p): n for p, n in shared.profiles().items()}
        gres = ",".join(f"gpu:{p}:{n}" for p, n in profiles.items())
        cfg = ",".join([f"gres/gpu={sum(profiles.values())}",
                        *(f"gres/gpu:{p}={n}" for p, n in profiles.items())])
        return gres, cfg
    n, model = node.gpu_count, names.whole(node.gpu_model)
    shards = n * shared.shards
    return (f"gpu:{model}:{n},shard:{shards}",
            f"gres/gpu={n},gres/gpu:{model}={n},gres/shard={shards}")


def show_node_line(node: Node, shared: "SharedNode | None", boot: int,
                   names: GresNames = LEGACY, agent: "SlinkyAgent | None" = None,
                   k8s_node: str = "") -> str:
    """One ``scontrol -o show node`` line (the suite's real 22.05 shape)."""
    gres, cfg_gres = _gres(node, shared, names)
    sockets = 2
    mem_mb = node.mem_gb * 1024
    name = node.slurm_node
    addr = node.pod_ip(0) if agent is not None else name
    comment = f" Comment={agent.comment(k8s_node)}" if agent is not None else ""
    return (f"NodeName={name} Arch=x86_64 CoresPerSocket={node.cpus // sockets}  "
            f"CPUAlloc=0 CPUEfctv={node.cpus} CPUTot={node.cpus} CPULoad=0.00 "
            f"AvailableFeatures=(null) ActiveFeatures=(null) Gres={gres} "
            f"NodeAddr={addr} NodeHostName={name} Version=22.05.8 "
            f"OS=Linux 5.15.0-91-generic #101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023  "
            f"RealMemory={mem_mb} AllocMem=0 FreeMem={mem_mb // 2} Sockets={sockets} "
            f"Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A "
            f"MCS_label=N/A Partitions={node.slurm_partition}  BootTime={boot} "
            f"SlurmdStartTime={boot} LastBusyTime={boot} "
            f"CfgTRES=cpu={node.cpus},mem={_mem(mem_mb)},billing={node.cpus},{cfg_gres} "
            f"AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s "
            f"ExtSensorsWatts=0 ExtSensorsTemp=n/s{comment}")


def write_show_node(world: World, out_dir: Path, agents: "tuple[SlinkyAgent, ...]" = (),
                    hosts: dict[str, str] | None = None) -> None:
    """Every Slurm node of the world (whole-GPU nodes, then the shared ones) as of the window's
    start; ``hosts``: each Slinky node as Kubernetes registers it (its short name if absent)."""
    cfg = world.config
    names = GresNames(cfg.autodetect_gpu_types)
    shared = world.sharing.nodes if world.sharing is not None else ()
    by_name = {n.name: n for n in shared}
    by_agent = {a.node.name: a for a in agents}
    slurm_nodes = [n for n in world.nodes if n.in_slurm]
    slurm_nodes += [n.node for n in shared if n.node.in_slurm]
    boot = cfg.window_start - BOOTED_BEFORE
    with open_output(out_dir / SHOW_NODE, compress=False) as fh:
        for node in slurm_nodes:
            fh.write(show_node_line(node, by_name.get(node.name), boot, names,
                                    by_agent.get(node.name),
                                    (hosts or {}).get(node.name, node.name)) + "\n")
