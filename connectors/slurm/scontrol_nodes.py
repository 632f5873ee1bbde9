"""The GPU nodes Slurm knows, from ``scontrol -o show node`` (one line per node).

A line is ``Key=Value`` pairs separated by spaces, but some values hold spaces themselves
(``OS=Linux 5.15.0-91-generic #101-Ubuntu SMP …``, ``Reason=disk failing [root@…]``), so a
word only starts a new pair when it is a key ``scontrol`` prints for nodes and that key has not
been seen on the line yet (a ``Reason`` that mentions ``NodeName=n2`` stays text).

``Gres`` is a comma list of ``name[:type][:count][(S:sockets)]``: ``gpu:a100:4(S:0-1)``,
``gpu:4``, ``gpu:nvidia_h100_80gb_hbm3_4g.40gb:2`` (a MIG profile as a type),
``gpu:A100:4(S:0-1),lscratch:3570``; ``(null)`` when the node has none. Only the ``gpu`` entries
count. A count may carry Slurm's suffix (``1K``). Lines that cannot be read are rejects (file,
line, field, reason), never dropped; nodes without GPUs are not inventory and are left out
silently (they are not an error).

Sources of the shapes: the suite's real Slurm 22.05 (tests/slurm_real), Slurm 25.11
``State=IDLE+DYNAMIC_NORM`` / ``Gres=(null)`` (SlinkyProject/slurm-operator issue #101), MIG
types ``nvidia_h100_80gb_hbm3_4g.40gb`` (stackhpc/ansible-slurm-appliance PR #656).
"""

import re
from dataclasses import dataclass

import polars as pl

from connectors.errors import Reject

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
# MIG profiles as Slurm types: 1g.10gb, 3g.40gb, nvidia_a100_3g.20gb …
_MIG = re.compile(r"(?:^|_)\d+g\.\d+gb$", re.IGNORECASE)
_SUFFIX = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}

NODE_SCHEMA = {
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
    parts, depth, cur = [], 0, []
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
                         ) -> tuple[pl.DataFrame, list[Reject]]:  # fmt: skip
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
                "mig": bool(_MIG.search(model)), "gres": kv.get("Gres", ""),
                "partitions": "" if kv.get("Partitions") in (None, "(null)")
                else kv["Partitions"],
                "state": kv.get("State", ""), "line_no": line_no,
            })
    frame = pl.DataFrame(rows, schema=NODE_SCHEMA) if rows else pl.DataFrame(schema=NODE_SCHEMA)
    return frame, rejects
