"""Writes the two sacct dumps row by row, as Slurm 22.05 prints them.

* ``sacct-P.txt``: ``--parsable2 --noconvert`` with ``|``, local ISO times (``sacct_timezone``)
  and the classic field order with JobName third, so a ``|`` in a job name really adds a column;
* ``sacct-unitsep-epoch.txt``: ``--delimiter=$'\\x1f' --noconvert`` with ``SLURM_TIME_FORMAT=%s``
  in the contract's ``SACCT_FIELDS`` order.

Both use ``--noconvert`` (memory in ``M``) like the real captures in
tests/fixtures/real_slurm/.
"""

from dataclasses import dataclass, fields
from pathlib import Path

from connectors.slurm.fields import SACCT_FIELDS, UNIT_SEPARATOR
from simulator.outputs import open_output
from simulator.timefmt import elapsed, iso_local

CLASSIC_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User", "UID", "Account", "Partition", "QOS", "State",
    "ExitCode", "DerivedExitCode", "Submit", "Eligible", "Start", "End", "Elapsed", "ElapsedRaw",
    "TimelimitRaw", "AllocCPUS", "AllocNodes", "NodeList", "AllocTRES", "ReqTRES", "Cluster",
    "Reservation", "Reason", "Flags", "WCKey", "AdminComment",
)
TIME_FIELDS = ("Submit", "Eligible", "Start", "End")
TRES_FIELDS = frozenset({"AllocTRES", "ReqTRES"})

Tres = tuple[tuple[str, int], ...]  # (name, value); memory ("mem") in MiB


@dataclass(frozen=True)
class SacctRow:
    """One printed line; times are epoch ints or the words ``Unknown``/``None``."""

    job_id: str
    job_id_raw: str
    job_name: str
    user: str
    uid: str
    account: str
    partition: str
    qos: str
    state: str
    exit_code: str
    derived_exit_code: str
    submit: int | str
    eligible: int | str
    start: int | str
    end: int | str
    elapsed_seconds: int
    timelimit_raw: str
    alloc_cpus: str
    alloc_nodes: str
    node_list: str
    alloc_tres: Tres
    req_tres: Tres
    cluster: str
    reservation: str
    reason: str
    flags: str
    wckey: str
    admin_comment: str


_ATTR = {
    "JobID": "job_id", "JobIDRaw": "job_id_raw", "JobName": "job_name", "User": "user",
    "UID": "uid", "Account": "account", "Partition": "partition", "QOS": "qos",
    "State": "state", "ExitCode": "exit_code", "DerivedExitCode": "derived_exit_code",
    "Submit": "submit", "Eligible": "eligible", "Start": "start", "End": "end",
    "TimelimitRaw": "timelimit_raw", "AllocCPUS": "alloc_cpus", "AllocNodes": "alloc_nodes",
    "NodeList": "node_list", "AllocTRES": "alloc_tres", "ReqTRES": "req_tres",
    "Cluster": "cluster", "Reservation": "reservation", "Reason": "reason", "Flags": "flags",
    "WCKey": "wckey", "AdminComment": "admin_comment",
}
assert set(_ATTR.values()) | {"elapsed_seconds"} == {f.name for f in fields(SacctRow)}


def render_tres(tres: Tres, convert: bool) -> str:
    """``billing=16,cpu=4,gres/gpu:a100=1,gres/gpu=1,mem=8G,node=1``: sorted as whole strings."""
    parts = []
    for name, value in tres:
        if name == "mem":
            text = f"{value // 1024}G" if convert and value % 1024 == 0 else f"{value}M"
            parts.append(f"mem={text}")
        else:
            parts.append(f"{name}={value}")
    return ",".join(sorted(parts))


def _render(row: SacctRow) -> dict[str, str]:
    """Every field as the epoch dump prints it (times as epoch seconds)."""
    out: dict[str, str] = {}
    for field, attr in _ATTR.items():
        value = getattr(row, attr)
        if field in TRES_FIELDS:
            out[field] = render_tres(value, convert=False)  # --noconvert in both dumps
        else:
            out[field] = value if isinstance(value, str) else str(value)
    out["Elapsed"] = elapsed(row.elapsed_seconds)
    out["ElapsedRaw"] = str(row.elapsed_seconds)
    return out


class SacctWriter:
    """Both dump variants, header first, one line per job/step row."""

    def __init__(self, sacct_dir: Path, zone: str, gzip: bool) -> None:
        suffix = ".gz" if gzip else ""
        self.paths = (sacct_dir / f"sacct-P.txt{suffix}",
                      sacct_dir / f"sacct-unitsep-epoch.txt{suffix}")
        self.zone = zone
        self._plain = open_output(self.paths[0], gzip)
        self._epoch = open_output(self.paths[1], gzip)
        self._plain.write("|".join(CLASSIC_FIELDS) + "\n")
        self._epoch.write(UNIT_SEPARATOR.join(SACCT_FIELDS) + "\n")
        self.rows = 0

    def write(self, row: SacctRow) -> None:
        fields = _render(row)
        self._epoch.write(UNIT_SEPARATOR.join([fields[f] for f in SACCT_FIELDS]) + "\n")
        for name in TIME_FIELDS:  # the plain dump prints local ISO times
            value = getattr(row, _ATTR[name])
            if not isinstance(value, str):
                fields[name] = iso_local(value, self.zone)
        self._plain.write("|".join([fields[f] for f in CLASSIC_FIELDS]) + "\n")
        self.rows += 1

    def close(self) -> None:
        self._plain.close()
        self._epoch.close()
