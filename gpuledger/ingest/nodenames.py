"""One canonical name per machine, decided once, on ingest (docs/node-names.md).

The same machine is ``gpu-01`` in Slurm and ``gpu-01.cluster.example.org`` in Kubernetes and
dcgm-exporter. Every ingest path turns the node names it read into canonical names *before* it
writes anything, so every table and every join (allocations, usage, detectors) sees one name:

1. an alias the site configured (``node_aliases``: raw name -> canonical name; the raw name is
   matched case-insensitively) wins;
2. an IP address stays as it is (its first dot-separated part means nothing);
3. a dotted name becomes its short name (the part before the first dot), unless that short
   name already stands for *another* dotted name in the ledger's register of names
   (``node_names``): then it is kept whole and a warning asks for an alias;
4. anything else stays as it is.

``node_names`` records each raw name once, with its canonical name and the rule that decided it,
so a figure can be traced from the canonical name back to what the source said. A name's
canonical form never changes after it was recorded (an alias added later applies to data loaded
later; re-ingest a window to apply it to older rows).
"""

import ipaddress
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import duckdb
import polars as pl

from models import schema
from models.runner import append_rows, replace_rows, transaction

log = logging.getLogger("gpuledger.nodes")

RULE_ALIAS = "alias"
RULE_SHORT = "short_name"
RULE_AS_IS = "as_is"
RULE_KEPT_WHOLE = "kept_whole"  # its short name stands for another machine


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass
class NodeNamer:
    """The naming rule with the ledger's aliases and register, applied in memory.

    Build it with :func:`load_namer` before reading a source, apply it to frames with
    :meth:`canonical_frame`, then :func:`record_names` in the write transaction.
    """

    aliases: Mapping[str, str] = field(default_factory=dict)
    known: dict[str, str] = field(default_factory=dict)  # raw -> canonical (the register)
    new: dict[str, tuple[str, str]] = field(default_factory=dict)  # raw -> (canonical, rule)
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._aliases = {k.strip().lower(): v.strip() for k, v in self.aliases.items()}
        self._short_owner: dict[str, str] = {}
        for raw, canonical in self.known.items():
            if "." in raw and canonical == raw.split(".", 1)[0]:
                self._short_owner.setdefault(canonical, raw)

    def canonical(self, raw: str | None) -> str | None:
        if raw is None:
            return None
        name = raw.strip()
        if not name:
            return raw
        if raw in self.known:
            return self.known[raw]
        if raw in self.new:
            return self.new[raw][0]
        canonical, rule = self._decide(name)
        self.new[raw] = (canonical, rule)
        return canonical

    def _decide(self, name: str) -> tuple[str, str]:
        alias = self._aliases.get(name.lower())
        if alias:
            return alias, RULE_ALIAS
        if "." not in name or _is_ip(name):
            return name, RULE_AS_IS
        short = name.split(".", 1)[0]
        owner = self._short_owner.get(short)
        if owner is not None and owner.lower() != name.lower():
            self.warnings.append(
                f"node name {name!r}: its short name {short!r} already stands for {owner!r}; "
                f"kept whole (add an alias for one of them in node_aliases to say which "
                f"machine {short!r} is)"
            )
            return name, RULE_KEPT_WHOLE
        self._short_owner.setdefault(short, name)
        return short, RULE_SHORT

    def canonical_frame(self, frame: pl.DataFrame, columns: Iterable[str] = ("node",)
                        ) -> pl.DataFrame:
        """`frame` with each of `columns` (String, or a list of String such as a run's
        ``nodes``) in canonical names. Columns the frame lacks are skipped."""
        for column in columns:
            if column not in frame.columns or frame.height == 0:
                continue
            is_list = isinstance(frame.schema[column], pl.List)
            names = frame[column].explode() if is_list else frame[column]
            mapping = {v: self.canonical(v) for v in names.drop_nulls().unique().to_list()}
            changed = {k: v for k, v in mapping.items() if k != v}
            if not changed:
                continue
            old, new = list(changed), list(changed.values())
            expr = (pl.col(column).list.eval(pl.element().replace(old, new)) if is_list
                    else pl.col(column).replace(old, new))
            frame = frame.with_columns(expr.alias(column))
        return frame


def load_namer(con: duckdb.DuckDBPyConnection) -> NodeNamer:
    """The rule with the ledger's aliases and register of names (a short read)."""
    aliases = dict(con.execute(f"SELECT alias, canonical FROM {schema.NODE_ALIASES.name}")
                   .fetchall())
    known = dict(con.execute(f"SELECT raw, canonical FROM {schema.NODE_NAMES.name}").fetchall())
    return NodeNamer(aliases=aliases, known=known)


def record_names(con: duckdb.DuckDBPyConnection, namer: NodeNamer, source: str) -> int:
    """Add the names `namer` decided since it was loaded to ``node_names`` (inside the caller's
    transaction); names recorded meanwhile by another writer are left as they are."""
    for text in namer.warnings:  # a person sees a collision whichever entry point loaded it
        log.warning("%s", text)
    if not namer.new:
        return 0
    now = datetime.now(UTC).replace(tzinfo=None)
    frame = pl.DataFrame(
        [(raw, canonical, rule, source, now)
         for raw, (canonical, rule) in sorted(namer.new.items())],
        schema={"raw": pl.String, "canonical": pl.String, "rule": pl.String,
                "source": pl.String, "first_seen_at": pl.Datetime("us")},
        orient="row",
    )
    present = {r[0] for r in con.execute(
        f"SELECT raw FROM {schema.NODE_NAMES.name} WHERE list_contains(?::VARCHAR[], raw)",
        [frame["raw"].to_list()]).fetchall()}
    frame = frame.filter(~pl.col("raw").is_in(list(present)))
    appended = append_rows(con, schema.NODE_NAMES, frame)
    namer.known.update({raw: canonical for raw, (canonical, _) in namer.new.items()})
    namer.new.clear()
    return appended


def set_node_aliases(con: duckdb.DuckDBPyConnection, aliases: Mapping[str, str]) -> int:
    """Replace the ledger's alias map with `aliases` (raw name -> canonical name)."""
    rows = []
    for alias, canonical in sorted(aliases.items()):
        if not str(alias).strip() or not str(canonical).strip():
            msg = (f"expected node_aliases entries 'raw name' = 'canonical name', found "
                   f"{alias!r} = {canonical!r}")
            raise ValueError(msg)
        rows.append((str(alias).strip(), str(canonical).strip()))
    frame = pl.DataFrame(rows, schema={"alias": pl.String, "canonical": pl.String},
                         orient="row")
    with transaction(con):
        return replace_rows(con, schema.NODE_ALIASES, frame, atomic=False)
