"""The header line of a sacct dump: which field each column holds, and what a dump must have.

Names and aliases
-----------------
sacct prints one field under two names in places: ``NCPUS`` is ``AllocCPUS`` (the same print
routine in ``src/sacct/sacct.c``), and ``NNodes`` is ``AllocNodes`` except for a job that was
never allocated nodes: there ``AllocNodes`` is 0 and ``NNodes`` falls back to the ``node=`` count
of ``AllocTRES``, else of ``ReqTRES`` (``PRINT_NNODES`` in ``src/sacct/print.c``; a real 20.11
``--format=ALL`` dump of pending jobs shows ``AllocNodes`` 0 and ``NNodes`` 1). ``--format=ALL``
holds both names of both fields, and a site may also list one field twice.

A field may therefore come under several header columns. The first column with the field's own
spelling (else the first of them) is *the* column read; every other one is a *twin* whose value
must agree with it on each row (equal text; for ``NNodes`` next to ``AllocNodes`` also sacct's
fallback above). A row on which they disagree is rejected, with the twin's name as the field;
the other rows load. Header names are matched case-insensitively.

In :class:`HeaderColumns` (one entry per column) a read column is its canonical field name, a
twin is ``"<name as printed>@<position>"`` (:func:`twin_key`), and a column nobody reads is
``None``.

What a dump must have
---------------------
GPU-seconds need :data:`GPU_SECONDS_FIELDS`: ``JobID`` (which allocation, steps apart),
``State`` (running or ended, the invoice line's outcome), ``Submit`` (with JobID the run key of a
requeued job's runs), ``Start``, ``End``, ``NodeList`` (which nodes) and ``AllocTRES`` (how many
GPUs). Two more are derived when absent:

- ``JobIDRaw``: for a plain ``123`` (and its steps ``123.batch``) JobIDRaw *is* the JobID. For an
  array task ``123_4`` or a het component ``123+1`` the database id cannot be derived (the
  last task of an array reuses the array's id, the others get new ones; a het component's id is
  usually, not always, ``123 + offset``), so ``job_id_raw`` stays null and the run key is built
  from the JobID text: ``{cluster}:123_4:{submit}``, ``{cluster}:123+1:{submit}``,
  ``{cluster}:123_[5-9%2]:{submit}`` (steps ``123_4.batch`` belong to the run ``123_4``).
- ``Cluster``: the ``cluster`` given to the parser (``gpuledger import-sacct --cluster NAME``,
  else ``cluster`` in ``gpuledger.toml``). Given *and* in the dump, each row's Cluster must be
  that name, or the row is rejected.

A dump that lacks a needed field is refused whole: ``expected Start, End in the header, found
none`` (with the header that was found).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from connectors.errors import SourceError
from connectors.slurm.fields import FREE_TEXT_FIELDS as CONTRACT_FREE_TEXT_FIELDS

#: Fields the parser reads (canonical spelling). Anything else in a header is ignored.
KNOWN_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User", "UID", "Account", "Partition", "QOS", "State",
    "ExitCode", "DerivedExitCode", "Submit", "Eligible", "Start", "End", "Elapsed", "ElapsedRaw",
    "Timelimit", "TimelimitRaw", "AllocCPUS", "AllocNodes", "NodeList", "AllocTRES", "ReqTRES",
    "Cluster", "Reservation", "Reason", "Flags", "WCKey", "AdminComment",
)

#: Other names sacct prints for a known field (upper case → canonical).
ALIASES: Mapping[str, str] = {"NNODES": "AllocNodes", "NCPUS": "AllocCPUS"}

#: Fields whose text is free (user-given or arbitrary): only they may hold a stray separator.
#: All of them are in sacct 22.05's ``--format=ALL``.
FREE_TEXT_FIELDS: frozenset[str] = frozenset(CONTRACT_FREE_TEXT_FIELDS) | {
    "JobName", "AdminComment", "SystemComment", "Comment", "WCKey", "SubmitLine", "WorkDir",
    "Constraints", "Container",
}

#: Without these a dump cannot give GPU-seconds per run (see the module docstring).
GPU_SECONDS_FIELDS: tuple[str, ...] = (
    "JobID", "State", "Submit", "Start", "End", "NodeList", "AllocTRES",
)

#: The raw column holding the cluster name given to the parser when the dump has Cluster too.
GIVEN_CLUSTER = "Cluster@given"

_JOBID_IS_RAW_RE = r"^\d+(?:\.|$)"  # 123, 123.batch: JobIDRaw is the JobID


class SacctFormatError(SourceError):
    """The dump as a whole cannot be read: no header, required fields missing, no delimiter."""


class HeaderColumns(list[str | None]):
    """The field each header column holds (see the module docstring), plus the header's names
    as printed and the cluster given for dumps without (or to check) a Cluster field."""

    def __init__(self, entries: Sequence[str | None], names: Sequence[str],
                 cluster: str | None = None) -> None:
        super().__init__(entries)
        self.names = tuple(names)
        self.cluster = cluster

    def twins(self) -> list[Twin]:
        return [t for t in (twin_of(e) for e in self if e is not None) if t is not None]


@dataclass(frozen=True)
class Twin:
    """A second header column of an already-read field."""

    key: str  # "NNodes@56": the raw column's name
    name: str  # as printed: "NNodes"
    field: str  # canonical: "AllocNodes"


def canonical(name: str) -> str | None:
    """The canonical spelling of a header name the parser knows, else None."""
    key = name.strip().upper()
    if key in ALIASES:
        return ALIASES[key]
    return _CANONICAL.get(key)


_CANONICAL = {f.upper(): f for f in (*KNOWN_FIELDS, *sorted(FREE_TEXT_FIELDS))}


def twin_key(name: str, position: int) -> str:
    return f"{name.strip()}@{position}"


def twin_of(entry: str) -> Twin | None:
    """The twin an entry of :class:`HeaderColumns` stands for, or None for a read column."""
    name, at, position = entry.rpartition("@")
    if not at or not position.isdigit():
        return None
    field = canonical(name)
    return Twin(entry, name, field) if field is not None else None


def field_of(entry: str | None) -> str | None:
    """The canonical field of a column entry (a twin's field for a twin)."""
    if entry is None:
        return None
    twin = twin_of(entry)
    return twin.field if twin is not None else entry


def header_columns(header: str, sep: str, source_file: str, *,
                   cluster: str | None = None) -> HeaderColumns:
    """Read a header line; raise :class:`SacctFormatError` when GPU-seconds cannot be had."""
    if cluster is not None and not re.fullmatch(r"\S+", cluster):
        msg = f"expected a cluster name without spaces, found {cluster!r}"
        raise ValueError(msg)
    names = header.split(sep)
    fields = [canonical(n) for n in names]
    primary: dict[str, int] = {}
    for i, (name, f) in enumerate(zip(names, fields, strict=True)):
        if f is None:
            continue
        own = name.strip().upper() == f.upper()
        if f not in primary or (own and names[primary[f]].strip().upper() != f.upper()):
            primary[f] = i
    entries = [
        None if f is None else f if primary[f] == i else twin_key(names[i], i)
        for i, f in enumerate(fields)
    ]
    columns = HeaderColumns(entries, names, cluster)
    needed = list(GPU_SECONDS_FIELDS) + ([] if cluster else ["Cluster"])
    missing = [f for f in needed if f not in primary]
    if missing:
        hint = ""
        if names and canonical(names[0]) is None:
            hint = " (is the header missing? sacct must run without --noheader)"
        elif "Cluster" in missing:
            hint = (" (a dump without Cluster needs the cluster's name: gpuledger import-sacct "
                    "--cluster NAME, or cluster = \"NAME\" in gpuledger.toml)")
        found = ", ".join(n.strip() for n in names)[:500]
        msg = (f"{source_file}: expected {', '.join(missing)} in the header (GPU-seconds need "
               f"{', '.join(GPU_SECONDS_FIELDS)} and Cluster), found none; the header is "
               f"{found}{hint}")
        raise SacctFormatError(msg)
    return columns


def derived_columns(header: HeaderColumns, frame_columns: Sequence[str]) -> list[pl.Expr]:
    """Raw columns to add to a frame of the header's read columns: JobIDRaw from JobID when the
    dump has none, Cluster (or the check of it) from the given cluster."""
    out: list[pl.Expr] = []
    if "JobIDRaw" not in frame_columns:
        jobid = pl.col("JobID")
        out.append(pl.when(jobid.str.contains(_JOBID_IS_RAW_RE)).then(jobid)
                   .otherwise(pl.lit(None, dtype=pl.String)).alias("JobIDRaw"))
    if header.cluster is not None:
        name = "Cluster" if "Cluster" not in frame_columns else GIVEN_CLUSTER
        out.append(pl.lit(header.cluster, dtype=pl.String).alias(name))
    return out


@dataclass(frozen=True)
class RowCheck:
    """A per-row check between columns: the row is rejected where ``bad`` is true."""

    key: str  # the flag column is _bad_<key>
    label: str  # the field named in the reject
    expected: str
    bad: pl.Expr
    found: Callable[[Mapping[str, object]], str]  # the "found …" text from the raw row


def _node_count_fallback() -> pl.Expr:
    """The node count sacct prints as NNodes for a job with AllocNodes 0."""
    alloc, req = pl.col("AllocTRES"), pl.col("ReqTRES")
    tres = pl.when(alloc.is_not_null() & (alloc != "")).then(alloc).otherwise(req)
    return tres.str.extract(r"(?:^|,)node=(\d+)(?:,|$)", 1)


def row_checks(columns: Sequence[str]) -> list[RowCheck]:
    """The twin and given-cluster checks that apply to a raw frame with ``columns``."""
    checks: list[RowCheck] = []
    for c in columns:
        twin = twin_of(c) if c != GIVEN_CLUSTER else None
        if twin is None or twin.field not in columns:
            continue
        value, other = pl.col(twin.key), pl.col(twin.field)
        agree = value.eq_missing(other)
        expected = (f"expected {twin.name} to equal {twin.field} (one sacct field under two "
                    "names)")
        if twin.field == "AllocNodes" and twin.name.upper() == "NNODES":
            count = _node_count_fallback()
            agree = agree | ((other == "0") & (count.is_null() | value.eq_missing(count)))
            expected = ("expected NNodes to equal AllocNodes (one sacct field under two names; "
                        "for a job without nodes, AllocNodes 0, sacct prints the node= count of "
                        "AllocTRES or ReqTRES)")

        def found(row: Mapping[str, object], twin: Twin = twin) -> str:
            return f"{twin.name} {row.get(twin.key)!r} and {twin.field} {row.get(twin.field)!r}"

        checks.append(RowCheck(twin.key, twin.name, expected, (~agree).fill_null(True), found))
    if GIVEN_CLUSTER in columns and "Cluster" in columns:
        given = pl.col(GIVEN_CLUSTER)

        def found_cluster(row: Mapping[str, object]) -> str:
            return f"{row.get('Cluster')!r} where {row.get(GIVEN_CLUSTER)!r} was given"

        checks.append(RowCheck(
            GIVEN_CLUSTER, "Cluster", "expected each row's Cluster to be the cluster given "
            "with --cluster",
            (~pl.col("Cluster").eq_missing(given)).fill_null(True), found_cluster,
        ))
    return checks
