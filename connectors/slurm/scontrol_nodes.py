"""The GPU nodes Slurm knows, from ``scontrol -o show node`` (one line per node).

A line is ``Key=Value`` pairs separated by spaces, but some values hold spaces themselves
(``OS=Linux 5.15.0-91-generic #101-Ubuntu SMP …``, ``Reason=disk failing [root@…]``), so a
word only starts a new pair when it is a key ``scontrol`` prints for nodes and that key has not
been seen on the line yet (a ``Reason`` that mentions ``NodeName=n2`` stays text).

``Gres`` is a comma list of ``name[:type][:count][(S:sockets)]``: ``gpu:a100:4(S:0-1)``,
``gpu:4``, ``gpu:nvidia_h100_80gb_hbm3_4g.40gb:2`` (a MIG profile as a type),
``gpu:nvidia_a100_1c.3g.20gb:3`` (MIG compute instances), ``gpu:A100:4(S:0-1),lscratch:3570``;
``(null)`` when the node has none. Only the ``gpu`` entries count. A count may carry Slurm's
suffix (``1K``). Lines that cannot be read are rejects (file, line, field, reason), never
dropped; nodes without GPUs are not inventory and are left out silently (they are not an error).

Sources of the shapes: the suite's real Slurm 22.05 (tests/slurm_real), Slurm 25.11
``State=IDLE+DYNAMIC_NORM`` / ``Gres=(null)`` (SlinkyProject/slurm-operator issue #101), MIG
types ``nvidia_h100_80gb_hbm3_4g.40gb`` (stackhpc/ansible-slurm-appliance PR #656), the names
AutoDetect=nvml builds (tests/fixtures/slurm/autodetect/README.md).
"""

import json
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import polars as pl

from connectors.errors import Reject
from connectors.frame_types import SchemaDict
from connectors.gpu_sharing import MIG, MPS, SHARD, gpu_slices, mig_compute_slices, slurm_gpu_type

REJECT_SOURCE = "scontrol_nodes"
# `scontrol -o show node`: every node, one line each
SCONTROL_NODES_COMMAND = ("scontrol", "-o", "show", "node")

# The keys scontrol prints for a node (Slurm 20.11 … 25.11); any other `Word=` is text.
NODE_KEYS = frozenset((
    "NodeName", "Arch", "CoresPerSocket", "CPUAlloc", "CPUEfctv", "CPUTot", "CPULoad",
    "AvailableFeatures", "ActiveFeatures", "Gres", "GresDrain", "GresUsed", "NodeAddr",
    "NodeHostName", "Port", "Version", "OS", "RealMemory", "AllocMem", "FreeMem", "Sockets",
    "Boards", "CoreSpecCount", "CPUSpecList", "MemSpecLimit", "State", "ThreadsPerCore", "TmpDisk",
    "Weight", "Owner", "MCS_label", "Partitions", "BootTime", "SlurmdStartTime", "LastBusyTime",
    "ResumeAfterTime", "CfgTRES", "AllocTRES", "CapWatts", "CurrentWatts", "AveWatts",
    "ExtSensorsJoules", "ExtSensorsWatts", "ExtSensorsTemp", "Reason", "Comment", "Extra",
    "InstanceId", "InstanceType", "NextState", "CpuBind", "ReservationName", "Features",
    "TopologyAddr", "TopologyQuota", "NodeAddr6", "LowestJoules", "ConsumedJoules",
))

_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z_][A-Za-z0-9_]*)=")
_SUFFIX = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}

NODE_SCHEMA: SchemaDict = {
    "node": pl.String,
    "gpu_model": pl.String,  # the GRES type, lower case ('' when the GRES has none)
    "gpu_count": pl.Int32,  # GPUs (or MIG slices) of that type on the node
    "mig": pl.Boolean,
    "gres": pl.String,  # the node's whole Gres field, as printed
    "partitions": pl.String,  # comma list, as printed
    "state": pl.String,
    "line_no": pl.Int64,
}


@dataclass(frozen=True)
class Gres:
    name: str
    type: str
    count: int


def pairs(line: str) -> dict[str, str]:
    """The ``Key=Value`` pairs of one ``scontrol -o`` line (see the module docstring)."""
    found: list[tuple[str, int, int]] = []  # key, where its value starts, where the key starts
    seen: set[str] = set()
    for m in _KEY.finditer(line):
        key = m.group(1)
        if key in NODE_KEYS and key not in seen:
            seen.add(key)
            found.append((key, m.end(), m.start()))
    out: dict[str, str] = {}
    for i, (key, start, _) in enumerate(found):
        end = found[i + 1][2] if i + 1 < len(found) else len(line)
        out[key] = line[start:end].strip()
    return out


def _count(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMGT]?)", text)
    if not m:
        msg = f"expected a GRES count such as 4 or 1K, found {text!r}"
        raise ValueError(msg)
    return int(m.group(1)) * _SUFFIX.get(m.group(2), 1)


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (``gpu:a100:2(S:0,1)`` stays whole)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_gres(text: str) -> list[Gres]:
    """Every entry of a node's ``Gres`` field; ``(null)``/``N/A``/empty: none.

    ``name:type:count``, ``name:count``, ``name`` (count 1); the socket suffix ``(S:…)`` is
    dropped. A malformed entry raises ``ValueError`` saying what was expected.
    """
    text = text.strip()
    if text in ("", "(null)", "N/A", "none"):
        return []
    out = []
    for entry in _split_top(text):
        body = entry.split("(", 1)[0]
        if entry.count("(") != entry.count(")") or (("(" in entry) and not entry.endswith(")")):
            msg = f"expected a GRES entry such as gpu:a100:4(S:0-1), found {entry!r}"
            raise ValueError(msg)
        bits = body.split(":")
        if not bits[0] or len(bits) > 3 or any(not b for b in bits):
            msg = f"expected a GRES entry such as gpu:a100:4(S:0-1), found {entry!r}"
            raise ValueError(msg)
        if len(bits) == 1:
            out.append(Gres(bits[0], "", 1))
        elif len(bits) == 2:
            out.append(Gres(bits[0], "", _count(bits[1])))
        else:
            out.append(Gres(bits[0], bits[1], _count(bits[2])))
    return out


def parse_scontrol_nodes(text: str, *, source_file: str = "scontrol -o show node"
                         ) -> tuple[pl.DataFrame, list[Reject]]:
    """One row per GPU type per node (``NODE_SCHEMA``) and the lines that could not be read."""
    rows: list[dict[str, object]] = []
    rejects: list[Reject] = []
    seen: dict[str, int] = {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue

        def reject(field: str, reason: str, _n: int = line_no, _raw: str = raw) -> None:
            rejects.append(Reject(REJECT_SOURCE, source_file, _n, field, reason, _raw))

        if not line.startswith("NodeName="):
            reject("NodeName", f"expected a line starting NodeName=, found {line[:40]!r}")
            continue
        kv = pairs(line)
        node = kv.get("NodeName", "")
        if not node or " " in node:
            reject("NodeName", f"expected a node name, found {node!r}")
            continue
        if node in seen:
            reject("NodeName", f"expected one line per node, found {node!r} again "
                   f"(first on line {seen[node]})")
            continue
        seen[node] = line_no
        try:
            gres = [g for g in parse_gres(kv.get("Gres", "")) if g.name == "gpu"]
        except ValueError as exc:
            reject("Gres", str(exc))
            continue
        by_type: dict[str, int] = {}
        for g in gres:
            by_type[g.type.lower()] = by_type.get(g.type.lower(), 0) + g.count
        for model, count in by_type.items():
            if count <= 0:
                continue
            rows.append({
                "node": node, "gpu_model": model, "gpu_count": count,
                "mig": slurm_gpu_type(model).sharing == MIG, "gres": kv.get("Gres", ""),
                "partitions": "" if kv.get("Partitions") in (None, "(null)")
                else kv["Partitions"],
                "state": kv.get("State", ""), "line_no": line_no,
            })
    frame = pl.DataFrame(rows, schema=NODE_SCHEMA) if rows else pl.DataFrame(schema=NODE_SCHEMA)
    return frame, rejects


#: Slurm nodes that are Slinky slurmd pods: ``Comment={"namespace":…,"podName":…,"node":…}``
#: (SlinkyProject/slurm-operator docs/usage/topology.md, written by the NodeSet controller).
SLINKY_POD_SCHEMA: SchemaDict = {
    "node": pl.String,  # the Slurm NodeName
    "pod_namespace": pl.String,
    "pod_name": pl.String,
    "k8s_node": pl.String,  # the Kubernetes node the pod ran on, as the comment says
    "line_no": pl.Int64,
}


def slinky_node_pods(text: str) -> pl.DataFrame:
    """The Slurm nodes whose ``Comment=`` names their slurmd pod (``SLINKY_POD_SCHEMA``). A
    comment is free text: one that is not such a JSON object names no pod (not a reject)."""
    rows = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        kv = pairs(raw.strip()) if raw.strip().startswith("NodeName=") else {}
        try:  # the JSON object at the start of the value (a later field may follow it)
            comment, _ = json.JSONDecoder().raw_decode(kv.get("Comment", ""))
        except ValueError:
            continue
        if not isinstance(comment, dict) or not isinstance(comment.get("podName"), str) \
                or not isinstance(comment.get("namespace"), str):
            continue
        node = comment.get("node")
        rows.append({"node": kv["NodeName"], "pod_namespace": comment["namespace"],
                     "pod_name": comment["podName"],
                     "k8s_node": node if isinstance(node, str) else None, "line_no": line_no})
    return pl.DataFrame(rows, schema=SLINKY_POD_SCHEMA)


#: Shared GPUs of a node from its ``Gres=`` (docs/shared-gpus.md): one row per (node, sharing,
#: MIG profile), the columns of ``node_gpu_slices``.
SLURM_SLICE_SCHEMA: SchemaDict = {
    "node": pl.String,
    "sharing": pl.String,  # mig, shard, mps
    "slice_profile": pl.String,  # MIG profile (1g.10gb); null otherwise
    "units": pl.Int32,  # MIG instances of the profile, shards, MPS units on the node
    "physical_gpus": pl.Int32,
    "units_per_gpu": pl.Int32,  # shards / MPS units per GPU; MIG: the profile's compute slices
    "gpu_slices": pl.Int32,  # MIG: compute slices per physical GPU (7; 4 on an A30)
    "mig_config": pl.String,  # Slurm has none: null
}


def node_slices(nodes: pl.DataFrame) -> pl.DataFrame:
    """The shared GPUs of the nodes :func:`parse_scontrol_nodes` read, from their ``Gres``.

    - ``gpu:1g.10gb:7`` (a type naming a MIG profile, ``connectors.gpu_sharing``): 7 instances.
      Slurm does not say how many physical GPUs they are cut from: ``physical_gpus`` is the
      fewest GPUs the node's MIG instances fit on (their compute slices over the GPU's 7, or 4
      on an A30, rounded up: 7 x 1g + 2 x 3g = 13 slices -> 2 GPUs), plus its whole GPUs. A
      compute instance (``gpu:nvidia_a100_1c.3g.20gb:3``) counts its own slices (1 each):
      ``units_per_gpu`` 1.
    - ``shard:8`` / ``mps:200``: shards / MPS units over the node's whole (non-MIG) GPUs, which
      gres.conf must name as their ``File``: ``units_per_gpu`` = units / GPUs (8 over 2 -> 4).
    """
    rows: list[dict[str, object]] = []
    for node, gres_text in nodes.select("node", "gres").unique(maintain_order=True).iter_rows():
        gres = parse_gres(gres_text or "")
        whole = 0
        mig: dict[str, list[Any]] = {}  # profile -> [instances, model]
        shared: dict[str, int] = {}
        for g in gres:
            if g.name == "gpu":
                s = slurm_gpu_type(g.type) if g.type else None
                if s is not None and s.sharing == MIG and s.slice_profile:
                    entry = mig.setdefault(s.slice_profile, [0, s.model])
                    entry[0] += g.count
                else:
                    whole += g.count
            elif g.name in (SHARD, MPS):
                shared[g.name] = shared.get(g.name, 0) + g.count
        used = sum((Fraction(count * mig_compute_slices(profile), gpu_slices(model))
                    for profile, (count, model) in mig.items()), Fraction(0))
        physical = whole + math.ceil(used)
        for profile, (count, model) in mig.items():
            rows.append({"node": node, "sharing": MIG, "slice_profile": profile, "units": count,
                         "physical_gpus": physical,
                         "units_per_gpu": mig_compute_slices(profile),
                         "gpu_slices": gpu_slices(model), "mig_config": None})
        for mode, units in shared.items():
            rows.append({"node": node, "sharing": mode, "slice_profile": None, "units": units,
                         "physical_gpus": whole,
                         "units_per_gpu": units // whole if whole else None,
                         "gpu_slices": None, "mig_config": None})
    return pl.DataFrame(rows, schema=SLURM_SLICE_SCHEMA) if rows else pl.DataFrame(
        schema=SLURM_SLICE_SCHEMA)
