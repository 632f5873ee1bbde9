"""``<world>/gpuledger.toml``: the site file that describes a written world, every source in file
mode (the format of ``gpuledger/site/__init__.py``; ``sample_data/gpuledger.toml`` is one). Paths
are
relative to the world folder, so the folder can be moved whole."""

import json
from pathlib import Path

from simulator.config import SimConfig
from simulator.dra import SNAPSHOT_DIR as DRA_SNAPSHOT_DIR
from simulator.kueue_snapshots import SNAPSHOT_DIR
from simulator.outputs import open_output
from simulator.timefmt import iso_z

SITE_FILE = "gpuledger.toml"


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def site_text(cfg: SimConfig, *, scontrol_written: bool,
              kueue_snapshots_written: bool = False, dra_snapshots_written: bool = False) -> str:
    """The site file of a world written with ``cfg`` (``scontrol_written``: whether any
    ``slurm/scontrol-*.txt`` snapshot was written; ``kueue_snapshots_written``: whether the
    time-named Workload snapshots of ``kueue/snapshots/`` were, then ``[kueue] snapshot`` names
    that folder so the Workload history keeps the Workloads deleted in the window;
    ``dra_snapshots_written``: whether the ``dra/`` ResourceClaim snapshots were, then
    ``[dra] snapshot`` names that folder, gpuledger/site/dra.py)."""
    gz = ".gz" if cfg.gzip_all else ""
    lines = [
        "# A simulated world as a site (docs/site-file.md), written by the simulator: every",
        "# source in file mode. Paths are relative to this file's folder.",
        "[gpuledger]",
        f"first_day = {_q(cfg.start.isoformat())}",
        f"db = {_q(cfg.site_db)}",
        f"reports_dir = {_q(cfg.site_reports)}",
        'gpu_resources = ["nvidia.com/gpu"]',
        "",
        "[gpuledger.reference]",
        'nodes = "nodes.csv"',
        'accounts = "accounts.csv"',
        'identity_map = "identity_map.csv"',
        'rate_card = "rate_card.csv"',
        "",
        "[gpuledger.schedules]",
        "enabled = false  # a simulated world, not a deployment: schedules stay off",
        "",
        f"[gpuledger.clusters.{cfg.cluster}.slurm]",
        'mode = "dump"',
        f"dump = {_q('sacct/sacct-unitsep-epoch.txt' + gz)}",
        'dump_timezone = "UTC"',  # the unit-separator dump carries epoch times
        f"dump_as_of = {_q(iso_z(cfg.window_end))}",  # the dump was taken at the window end
        'sreport_utilization = "sreport/cluster-utilization.txt"',
        'sreport_accounts = "sreport/account-utilization-by-user.txt"',
    ]
    if scontrol_written:
        lines.append('scontrol_snapshots = "slurm"')
    if cfg.slinky:  # Comment= names each Slurm node's slurmd pod (simulator/slinky.py)
        lines.append('scontrol_nodes = "slurm/show-node.txt"')
    if cfg.metrics:
        name = "metrics.om.gz" if cfg.gzip_om else "metrics.om"
        lines += ["", f"[gpuledger.clusters.{cfg.cluster}.prometheus]",
                  f"openmetrics = {_q('prometheus/' + name)}"]
    snapshot = SNAPSHOT_DIR if kueue_snapshots_written else "kueue/workloads.json" + gz
    lines += ["", f"[gpuledger.clusters.{cfg.cluster}.kueue]", f"snapshot = {_q(snapshot)}"]
    # --dra-pods: kubectl get resourceclaims,resourceslices,pods (simulator/dra.py)
    if dra_snapshots_written:
        lines += ["", f"[gpuledger.clusters.{cfg.cluster}.dra]",
                  f"snapshot = {_q(DRA_SNAPSHOT_DIR)}"]
    return "\n".join(lines) + "\n"


def write_site_file(cfg: SimConfig, out_dir: Path, *, scontrol_written: bool,
                    kueue_snapshots_written: bool = False,
                    dra_snapshots_written: bool = False) -> None:
    with open_output(out_dir / SITE_FILE, compress=False) as fh:
        fh.write(site_text(cfg, scontrol_written=scontrol_written,
                           kueue_snapshots_written=kueue_snapshots_written,
                           dra_snapshots_written=dra_snapshots_written))
