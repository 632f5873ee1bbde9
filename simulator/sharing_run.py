"""``--shared-gpus``: feeds the shared-GPU plan into one simulation's writers and writes its own
files (``truth/shared_allocations.csv``, world.json ``shared_gpus``; ``slurm/show-node.txt``:
slurm_nodes.py).

The plan is made up front (it does not depend on the whole-GPU world); its sacct rows, pods and
``scontrol`` blocks join the streams in time order, so the whole-GPU part of the world is the
same as without the option.
"""

import csv
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.autodetect import LEGACY, GresNames
from simulator.openmetrics import scrape_offsets
from simulator.outputs import open_output
from simulator.records import Holder
from simulator.sharing_metrics import SharingMetrics, capacity, gfd_labels
from simulator.sharing_plan import SharedHolder, plan_sharing
from simulator.sharing_slurm import job_block, sacct_rows
from simulator.sharing_world import GPU_SLICES, SharingWorld
from simulator.slurm_nodes import SHOW_NODE
from simulator.timefmt import iso_utc
from simulator.truth import milli_text
from simulator.world import World

if TYPE_CHECKING:
    from simulator.engine import _Run

SHARED_ALLOCATION_COLUMNS = ("domain", "source_key", "node", "gpu_uuid", "gpu_instance",
                             "sharing", "slice_profile", "slices", "start", "end",
                             "physical_gpu_seconds")
SHARED_ALLOCATIONS = "truth/shared_allocations.csv"
POD_NUMBER_BASE = 200_000  # pod IPs apart from the whole-GPU world's pods


def truth_holder(h: SharedHolder, w1: int, names: GresNames = LEGACY) -> Holder:
    # a Slurm MIG run is priced by its type's model prefix (AutoDetect), shards by the node's
    typed = h.domain == "slurm" and h.instance is not None
    return Holder(
        domain=h.domain, source_key=h.source_key, name=h.name, node=h.node.node,
        gpu_indices=(h.gpu,), start=h.start, end=h.end, owner=h.owner,
        outcome="running" if h.end > w1 else "completed", charged=True, profile=h.profile,
        view=h.domain, dcgm=h.dcgm, account=h.account, user=h.user,
        qos="normal" if h.domain == "slurm" else "", units=h.units,
        gpu_model=names.mig_model(h.node.node.gpu_model) if typed else "")


class SharingRun:
    def __init__(self, world: World, gen_start: int) -> None:
        assert world.sharing is not None
        cfg = world.config
        self.world = world
        self.sharing: SharingWorld = world.sharing
        self.w0, self.w1 = cfg.window_start, cfg.window_end
        # the window's first and last kube-state-metrics scrape (the sweep: w0 .. w1 - step)
        offset = scrape_offsets(cfg.step_seconds)[0]
        scrapes = (self.w0 + offset, self.w1 - cfg.step_seconds + offset)
        self.plan = plan_sharing(cfg, self.sharing, gen_start, scrapes)
        self.metrics = (SharingMetrics(self.sharing, self.plan, self.w0, self.w1)
                        if cfg.metrics else None)
        self.jobs = sorted((h for h in self.plan.holders if h.domain == "slurm"),
                           key=lambda h: h.job_id)
        self.names = GresNames(cfg.autodetect_gpu_types)

    def start(self, run: "_Run") -> None:
        """Everything the plan adds to the streams, before the first arrival."""
        run.truth.physical = {}
        for k, h in enumerate(self.plan.holders):
            holder = truth_holder(h, self.w1, self.names)
            run.truth.add_holder(holder)
            if h.start < self.w1 and h.end > self.w0:
                run.truth.add_physical(holder, self.plan.segments[k])
        for incident in self.plan.incidents:
            run.truth.add_incident(incident)
        for h in self.jobs:
            if h.start < self.w1 and h.end > self.w0:
                run.seq += 1
                run.pending_rows.append((h.submit, run.seq, sacct_rows(
                    h, self.w1, self.world.config.cluster, self.names)))
                run.slurm_jobs += 1
        run.pending_rows.sort()  # a heap: sorted is one
        if run.sweep is not None and self.metrics is not None:
            cfg = self.world.config
            for pod in self.metrics.pods(cfg.seed, self.plan, POD_NUMBER_BASE,
                                         cfg.step_seconds):
                run.sweep.add_pod(pod)
        run.scontrol.extra_blocks = self.blocks

    def blocks(self, at: int) -> list[list[str]]:
        return [list(job_block(h, at, self.names)) for h in self.jobs
                if h.start <= at < h.end]

    # ------------------------------------------------------------------ files

    def write(self, out_dir: Path) -> None:
        rows = []
        for k, h in enumerate(self.plan.holders):
            lo, hi = max(h.start, self.w0), min(h.end, self.w1)
            if hi <= lo:
                continue
            physical = sum((share * (min(b, hi) - max(a, lo))
                            for a, b, share in self.plan.segments[k] if min(b, hi) > max(a, lo)),
                           start=0)
            inst = h.instance
            rows.append((h.domain, h.source_key, h.node.name, h.gpu_uuid,
                         "" if inst is None else inst.gi_id, h.sharing,
                         "" if inst is None else inst.profile, h.units, iso_utc(lo),
                         iso_utc(hi), milli_text(physical)))
        rows.sort(key=lambda r: (r[2], r[3], str(r[4]), r[8], r[1]))
        with open_output(out_dir / SHARED_ALLOCATIONS, compress=False) as fh:
            out = csv.writer(fh, lineterminator="\n")
            out.writerow(SHARED_ALLOCATION_COLUMNS)
            out.writerows(rows)

    def world_block(self) -> dict[str, object]:
        nodes = []
        for n in self.sharing.nodes:
            node = n.node
            doc: dict[str, object] = {
                "name": n.name, "pool": node.pool, "gpu_model": node.gpu_model,
                "gpus": node.gpu_count, "gpu_uuids": list(node.gpu_uuids),
                "sharing": n.sharing, "slurm_partition": node.slurm_partition,
            }
            if node.in_kubernetes:
                doc["kubernetes_capacity"] = capacity(n)
                doc["node_labels"] = gfd_labels(n)
            if n.sharing == "mig":
                doc["gpu_slices"] = GPU_SLICES
                doc["instances"] = [{"gpu": i.gpu, "gpu_instance": i.gi_id,
                                     "slice_profile": i.profile, "slices": i.slices,
                                     "slurm_idx": i.slurm_idx, "scheduler": i.owner}
                                    for i in n.instances]
            elif n.sharing == "time_slicing":
                doc["replicas_per_gpu"] = n.replicas
            else:
                doc["shards_per_gpu"] = n.shards
            nodes.append(doc)
        return {
            "nodes": nodes,
            "conflicts": [{**c, "start": iso_utc(int(c["start"])),  # type: ignore[call-overload]
                           "end": iso_utc(int(c["end"]))}  # type: ignore[call-overload]
                          for c in self.plan.conflicts],
            "charging": {
                "mig": "instances x profile compute slices / 7 x seconds",
                "time_slicing_and_shards": "each second of a physical GPU split among the "
                                           "holders present on it, by replicas/shards held",
                "gpu_seconds_daily": "units x seconds (instances, replicas, shards), as before",
            },
            "files": {"shared_allocations": SHARED_ALLOCATIONS,
                      "physical_gpu_seconds_daily": "truth/physical_gpu_seconds_daily.csv",
                      "scontrol_show_node": SHOW_NODE},
            "shard_placement": "scontrol show job -d prints GRES=shard(CNT:N) (Slurm 22.05, no "
                               "GPU); the GPU is in truth/shared_allocations.csv and in "
                               "dcgm-exporter's hpc_job series",
            "slurm_job_ids_from": self.jobs[0].job_id if self.jobs else None,
        }
