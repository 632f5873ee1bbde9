"""The world's descriptive files: the inventory and reference CSVs written first, and
world.json written last (it carries the run's summary)."""

import csv
import json
from dataclasses import asdict
from pathlib import Path

from simulator.config import SimConfig
from simulator.openmetrics import Irregularities, scrape_offsets
from simulator.outputs import open_output
from simulator.planted import PODS_READY_TIMEOUT, REQUEUE_BACKOFF, Plantings
from simulator.realistic import (
    IDLE_MIN_SECONDS,
    IDLE_THRESHOLD_PERCENT,
    INEFFICIENT_PERCENT,
    WORKLOAD_DELETE_AFTER,
    fqdn_some,
)
from simulator.scrape_shapes import KSM_POD, KUEUE_POD, ScrapeShapes, unlabelled_nodes
from simulator.timefmt import iso_utc, iso_z
from simulator.world import (
    ACCOUNT_PARENTS,
    COHORT,
    GPU_MODEL_NAMES,
    KUEUE_FLAVORS,
    NAMESPACES,
    Node,
    World,
)

GENERATOR = "simulator/1"


def write_static_files(world: World, out_dir: Path) -> None:
    with open_output(out_dir / "nodes.csv", compress=False) as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(("node", "pool", "gpu_model", "gpu_count", "gpu_index", "gpu_uuid",
                      "slurm_partition"))
        shared = tuple(s.node for s in world.sharing.nodes) if world.sharing else ()
        for n in (*world.nodes, *shared):
            for i, uuid in enumerate(n.gpu_uuids):
                out.writerow((n.name, inventory_pool(n), n.gpu_model, n.gpu_count, i, uuid,
                              n.slurm_partition))
    with open_output(out_dir / "identity_map.csv", compress=False) as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(("source_kind", "key", "person", "team", "cost_centre", "valid_from",
                      "valid_to"))
        for r in world.identity_rows:
            out.writerow((r.source_kind, r.key, r.person, r.team, r.cost_centre,
                          r.valid_from.isoformat() if r.valid_from else "",
                          r.valid_to.isoformat() if r.valid_to else ""))
    with open_output(out_dir / "accounts.csv", compress=False) as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(("account", "parent"))
        for account, parent in ACCOUNT_PARENTS.items():
            out.writerow((account, parent))
    with open_output(out_dir / "rate_card.csv", compress=False) as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(("gpu_model", "domain", "qos", "valid_from", "valid_to",
                      "rate_per_gpu_hour", "currency"))
        for r in world.rate_rows:
            out.writerow((r.gpu_model, r.domain, r.qos,
                          r.valid_from.isoformat() if r.valid_from else "",
                          r.valid_to.isoformat() if r.valid_to else "", r.rate, r.currency))


def inventory_pool(node: Node) -> str:
    """nodes.csv's pool: a Slinky node is a Kubernetes node, which Slurm also lists by the same
    name in DaemonSet mode (then ``shared``, as gpuledger's inventory merge calls a node both
    scontrol and kube-state-metrics list); its Slurm node ``slinky-N`` is no host of its own."""
    if not node.slinky:
        return node.pool
    return "kubernetes" if node.slurm_name else "shared"


def command_line(cfg: SimConfig, out: str) -> str:
    parts = [f"python -m simulator --seed {cfg.seed} --days {cfg.days} --out {out}",
             f"--start {cfg.start.isoformat()}", f"--nodes {cfg.nodes.describe()}",
             f"--step {cfg.step_seconds}"]
    if not cfg.metrics:
        parts.append("--no-metrics")
    if cfg.gzip_all:
        parts.append("--gzip")
    elif cfg.gzip_metrics:
        parts.append("--gzip-metrics")
    if cfg.dcgm_label_style != "drift":
        parts.append(f"--dcgm-label-style {cfg.dcgm_label_style}")
    if not cfg.irregularities:
        parts.append("--no-irregularities")
    if cfg.load != SimConfig.load:
        parts.append(f"--load {cfg.load}")
    if cfg.scontrol_every != SimConfig.scontrol_every:
        parts.append(f"--scontrol-every {cfg.scontrol_every}")
    parts.extend(shape_flags(cfg))
    if cfg.realistic:
        parts.append("--realistic")
    if cfg.shared_gpus:
        parts.append("--shared-gpus")
    if cfg.slinky_nodes:
        parts.append(f"--slinky-nodes {cfg.slinky_nodes}")
    elif cfg.slinky_share:
        parts.append(f"--slinky-nodes {cfg.slinky_share}")
    if cfg.slinky and cfg.slinky_mode != SimConfig.slinky_mode:
        parts.append(f"--slinky-mode {cfg.slinky_mode}")
    if cfg.autodetect_gpu_types:
        parts.append("--autodetect-gpu-types")
    if cfg.dra:
        parts.append(f"--dra-pods {cfg.dra_pods}")
        if not cfg.dcgm_dra_labels:
            parts.append("--no-dcgm-dra-labels")
        if cfg.dra_snapshot_every != SimConfig.dra_snapshot_every:
            parts.append(f"--dra-snapshot-every {cfg.dra_snapshot_every // 60}")
    if cfg.kueue_snapshot_every != (3600 if cfg.realistic else 0):
        parts.append(f"--kueue-snapshot-every {cfg.kueue_snapshot_every // 60}")
    if cfg.site_db != SimConfig.site_db:
        parts.append(f"--site-db {cfg.site_db}")
    if cfg.site_reports != SimConfig.site_reports:
        parts.append(f"--site-reports {cfg.site_reports}")
    return " ".join(parts)


def shape_flags(cfg: SimConfig) -> list[str]:
    """The real-cluster shape options as flags (each one spelled out, not --real-shapes)."""
    out = []
    if not cfg.honor_labels:
        out.append("--no-honor-labels")
    if cfg.fqdn_nodes:
        out.append("--fqdn-nodes")
    if cfg.init_container_gpus:
        out.append(f"--init-container-gpus {cfg.init_container_gpus}")
    if cfg.kueue_labels != SimConfig.kueue_labels:
        out.append(f"--kueue-labels {cfg.kueue_labels}")
    if cfg.dcgm_names != SimConfig.dcgm_names:
        out.append(f"--dcgm-names {cfg.dcgm_names}")
    if cfg.dcgm_hostname_label != SimConfig.dcgm_hostname_label:
        out.append(f"--dcgm-hostname-label {cfg.dcgm_hostname_label}")
    if cfg.no_pod_labels_nodes:
        out.append(f"--no-pod-labels-on {','.join(cfg.no_pod_labels_nodes)}")
    elif cfg.no_pod_labels_share:
        out.append(f"--no-pod-labels-on {cfg.no_pod_labels_share}")
    return out


def _real_shapes(world: World, layouts: dict[str, int]) -> dict[str, object]:
    """world.json ``real_shapes``: the options and what they made (docs/simulator-shapes.md)."""
    cfg = world.config
    k8s = [n for n in world.nodes if n.in_kubernetes]
    return {
        "options": cfg.shape_options(),
        "honor_labels": cfg.honor_labels,
        "exporter_pods": None if cfg.honor_labels else {
            "kube_state_metrics": KSM_POD, "kueue": KUEUE_POD,
            "dcgm_exporter": "gpu-operator/nvidia-dcgm-exporter-<suffix> per node"},
        "kubernetes_node_names": {n.name: ScrapeShapes.from_config(cfg, ()).host(n)
                                  for n in k8s} if cfg.fqdn_nodes else None,
        "dcgm_hostname": "FQDN on every node" if cfg.fqdn_nodes else "short name",
        "dcgm_names": cfg.dcgm_names,
        "dcgm_hostname_label": cfg.dcgm_hostname_label,
        "dcgm_without_pod_labels": list(unlabelled_nodes(cfg, world.nodes)),
        "kueue_labels": cfg.kueue_labels,
        "init_container_gpus": {"share": cfg.init_container_gpus,
                                "pods": dict(sorted(layouts.items()))},
        "truth": "canonical short node names; GPUs charged = the placement (every layout's "
                 "effective request equals it)",
    }


def autodetect_block() -> dict[str, object]:
    """world.json ``autodetect_gpu_types``: the GRES type names Slurm prints."""
    from simulator.autodetect import GresNames

    names = GresNames(autodetect=True)
    return {
        "gres_types": {m: names.whole(m) for m in GPU_MODEL_NAMES},
        "mig_types": {m: names.mig(m, "<profile>") for m in GPU_MODEL_NAMES},
        "source": "Slurm AutoDetect=nvml (gpu_nvml.c): the NVML device name lower case, "
                  "spaces as _; a MIG device: the name cut at its first -, _ and the profile "
                  "(tests/fixtures/slurm/autodetect/README.md)",
        "rate_card": "every slurm row again under each type name as printed (the ledger "
                     "prices a typed run by its type; the short names stay for untyped GPUs: "
                     "shards take the node's model)",
        "truth": "gpu_seconds_priced.csv names a typed Slurm run's model as the ledger reads "
                 "it: the type, a MIG type's prefix",
    }


def realistic_block(world: World, irr: Irregularities,
                    plantings: Plantings) -> dict[str, object]:
    """world.json ``realistic``: what --realistic added (docs/simulator-shapes.md)."""
    cfg = world.config
    by_kind: dict[str, int] = {}
    for decoy in plantings.decoys:
        kind = str(decoy.get("imitates", ""))
        by_kind[kind] = by_kind.get(kind, 0) + 1
    return {
        "fqdn_nodes": list(fqdn_some(cfg, world.nodes)),
        "dcgm_gaps": len(irr.exporter_outages),
        "ksm_clock_skew_seconds": irr.ksm_clock_skew,
        "workload_deleted_after_job_seconds": WORKLOAD_DELETE_AFTER,
        "kueue_snapshot_every_seconds": cfg.kueue_snapshot_every,
        "inefficient_share_percent": INEFFICIENT_PERCENT,
        "idle_rule": {"threshold_percent": IDLE_THRESHOLD_PERCENT,
                      "min_minutes": IDLE_MIN_SECONDS // 60},
        "decoys_by_kind": dict(sorted(by_kind.items())),
    }


def write_world_json(world: World, irr: Irregularities, plantings: Plantings,
                     summary: dict[str, object], out_dir: Path,
                     layouts: dict[str, int] | None = None,
                     shared_gpus: dict[str, object] | None = None,
                     slinky: dict[str, object] | None = None,
                     dra: dict[str, object] | None = None) -> None:
    """world.json: the config, window, inventory, queues, planted faults and decoys,
    conventions, the commands the dumps stand for, and the run's summary."""
    cfg = world.config
    w0, w1 = cfg.window_start, cfg.window_end
    pools: dict[str, dict[str, object]] = {}
    for pool in ("slurm", "kubernetes", "shared"):
        members = [n for n in world.nodes if n.pool == pool]
        models: dict[str, int] = {}
        for n in members:
            models[n.gpu_model] = models.get(n.gpu_model, 0) + n.gpu_count
        pools[pool] = {"nodes": len(members), "gpus": sum(n.gpu_count for n in members),
                       "gpu_models": models}
    late = plantings.late_cordons
    doc = {
        "generator": GENERATOR,
        "command": command_line(cfg, "DIR"),
        "seed": cfg.seed,
        "config": {
            "seed": cfg.seed, "days": cfg.days, "start": cfg.start.isoformat(),
            "nodes": asdict(cfg.nodes), "step_seconds": cfg.step_seconds,
            "metrics": cfg.metrics, "gzip_metrics": cfg.gzip_om, "gzip_all": cfg.gzip_all,
            "dcgm_label_style": cfg.dcgm_label_style, "irregularities": cfg.irregularities,
            "load": cfg.load, "scontrol_every": cfg.scontrol_every,
        },
        "cluster": cfg.cluster,
        "window": {"start": iso_z(w0), "end": iso_z(w1)},
        "sacct_timezone": cfg.sacct_timezone,
        "nodes": pools,
        "gpu_models": GPU_MODEL_NAMES,
        "slurm": {
            "partitions": {"gpu": "gpu-hpc-* (A100 x8 and H100 x4)",
                           "shared": "gpu-shr-* while Slurm owns them",
                           "cpu": "CPU components of heterogeneous jobs"},
            "accounts": {k: v or "root" for k, v in ACCOUNT_PARENTS.items()},
            "qos": ["normal", "high", "gpu-long"],
            "hpc_job_label": "dcgm-exporter's hpc_job label carries JobIDRaw",
            "bridge_user": "slurm (uid 64030), account kubernetes",
        },
        "shared_nodes": {
            "kubernetes": "Monday-Friday 08:00-20:00 UTC",
            "slurm": "all other times",
            "kube_node_spec_unschedulable": "1 while lent to Slurm",
            "slurm_state_while_lent_to_kubernetes": "DRAIN (sreport Down)",
        },
        "kueue": {
            "api_version": "kueue.x-k8s.io/v1beta1",
            "cohort": COHORT,
            "flavors": KUEUE_FLAVORS,
            "cluster_queues": {cq.name: cq.nominal for cq in world.cluster_queues},
            "local_queues": {f"{ns.name}/{ns.local_queue}": ns.cluster_queue
                             for ns in NAMESPACES},
            "wait_for_pods_ready_timeout_seconds": PODS_READY_TIMEOUT,
            "requeue_backoff_base_seconds": REQUEUE_BACKOFF,
        },
        "scrape": {"step_seconds": cfg.step_seconds,
                   "offsets_seconds": dict(zip(
                       ("dcgm", "kube_state_metrics", "kueue"),
                       (0, *scrape_offsets(cfg.step_seconds)), strict=True))},
        "identity_change_day": world.identity_change_day.isoformat()
        if world.identity_change_day else None,
        "irregularities": {
            "exporter_outages": [{"node": n, "start": iso_utc(a), "end": iso_utc(b)}
                                 for n, a, b in irr.exporter_outages],
            "kueue_restart": None if irr.kueue_restart is None else {
                "start": iso_utc(irr.kueue_restart[0]), "end": iso_utc(irr.kueue_restart[1]),
                "effect": "no Kueue samples in between; counters and histograms restart from "
                          "zero and reappear only when incremented"},
            "dcgm_label_drift": None if irr.label_drift_from is None else {
                "nodes": list(irr.label_drift_nodes), "from": iso_utc(irr.label_drift_from),
                "labels": "exported_pod/exported_namespace/exported_container; pod, namespace "
                          "and container then name the dcgm-exporter pod"},
            "dcgm_exported_labels_everywhere": irr.exported_everywhere,
            "late_cordons": [{"node": n, "planned": iso_utc(p), "actual": iso_utc(a)}
                             for n, p, a in late],
        },
        "decoys": plantings.decoys,
        "planted_skipped": plantings.skipped,
        "conventions": {
            "times": "UTC, half-open [start, end); truth uses naive ISO UTC",
            "slurm_source_key": "sacct JobID of the allocation row (requeued runs share it)",
            "kubernetes_source_key": "namespace/pod",
            "kubernetes_charged_interval": "pod phase Running: [running, finished)",
            "allocations_identity": "resolved on the allocation's first charged day",
            "allocations_end": "clipped to the window end for allocations still running",
            "busy_seconds": "sum over DCGM samples of GR_ENGINE_ACTIVE x step; physical truth, "
                            "also during the exporter outage; GPU-days with 0 are omitted",
            "double_scheduled_dcgm": "a GPU held by both schedulers has one series per holder "
                                     "with the same value",
            "sacct_pending_and_cancelled": "jobs cancelled while pending are included (real "
                                           "sacct shows them only with -s CA or -j)",
        },
        "commands": {
            "sacct_unitsep_epoch": "TZ=UTC SLURM_TIME_FORMAT=%s sacct --allusers --duplicates "
                                   "--parsable2 --noconvert --delimiter=$'\\x1f' "
                                   f"--starttime={iso_utc(w0)} --endtime={iso_utc(w1)} "
                                   "--format=<SACCT_FIELDS>",
            "sacct_P": f"TZ={cfg.sacct_timezone} sacct --allusers --duplicates --parsable2 "
                       "--noconvert --starttime=... --endtime=... "
                       "--format=JobID,JobIDRaw,JobName,...",
            "scontrol_snapshots": "TZ=UTC SLURM_TIME_FORMAT=%s scontrol --all --details show "
                                  "job, every scontrol_every seconds from the window start, "
                                  "RUNNING jobs holding GPUs only: "
                                  "slurm/scontrol-YYYYMMDDTHHMMSSZ.txt",
            "sreport_utilization": "TZ=UTC sreport -P -t seconds -T gres/gpu cluster "
                                   f"utilization start={iso_utc(w0)} end={iso_utc(w1)}",
            "sreport_account_by_user": "TZ=UTC sreport -P -t seconds -T gres/gpu cluster "
                                       f"AccountUtilizationByUser start={iso_utc(w0)} "
                                       f"end={iso_utc(w1)}",
        },
        "summary": {k: v for k, v in summary.items() if k != "out_dir"},
    }
    if cfg.shapes_changed:  # absent otherwise: worlds without the options stay byte-identical
        doc["real_shapes"] = _real_shapes(world, layouts or {})
    if cfg.realistic:  # absent otherwise, like real_shapes
        doc["realistic"] = realistic_block(world, irr, plantings)
    if shared_gpus is not None:  # --shared-gpus, absent otherwise
        doc["shared_gpus"] = shared_gpus
    if slinky is not None:  # --slinky-nodes, absent otherwise
        doc["slinky"] = slinky
    if cfg.autodetect_gpu_types:  # absent otherwise
        doc["autodetect_gpu_types"] = autodetect_block()
    if dra is not None:  # --dra-pods, absent otherwise
        doc["dra"] = dra
    with open_output(out_dir / "world.json", compress=False) as fh:
        fh.write(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
