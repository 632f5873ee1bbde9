"""Slurm hostlist expressions → node names.

``gpu-[01-03,07]`` → ``gpu-01, gpu-02, gpu-03, gpu-07``; ``a100-0[1-2]`` → ``a100-01, a100-02``;
``node1,node[3-4]`` → ``node1, node3, node4``; ``rack[1-2]-n[1-2]`` → the cartesian product in
Slurm's order; ``None assigned`` (sacct's text for a job that never got nodes) → no nodes.

Zero padding follows Slurm's ``hostlist.c``: a range is printed with the width of its lower bound
(``[08-10]`` → ``08, 09, 10``; ``[8-10]`` → ``8, 9, 10``).

The expansion is plain Python, applied once per *distinct* hostlist of a dump (a few thousand
even on big clusters), never per row.
"""

from __future__ import annotations

import re
from functools import lru_cache

import polars as pl
import pyarrow as pa

#: Texts sacct prints for "no nodes".
EMPTY_HOSTLISTS = frozenset({"", "None assigned", "(null)"})

_NAME_CHARS = re.compile(r"^[A-Za-z0-9_.\-]*$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
#: A cap so that a typo like ``n[1-99999999]`` cannot exhaust memory.
MAX_NODES = 1_000_000


class HostlistError(ValueError):
    """A hostlist expression that does not follow Slurm's syntax."""


def _split_top(expr: str) -> list[str]:
    """Split on commas outside brackets."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in expr:
        if ch == "[":
            depth += 1
            if depth > 1:
                msg = f"expected no nested brackets, found {expr!r}"
                raise HostlistError(msg)
        elif ch == "]":
            depth -= 1
            if depth < 0:
                msg = f"expected balanced brackets, found {expr!r}"
                raise HostlistError(msg)
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        msg = f"expected balanced brackets, found {expr!r}"
        raise HostlistError(msg)
    parts.append("".join(cur))
    return parts


def _expand_ranges(body: str, whole: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item)
        if m is None:
            msg = f"expected ranges like 01-03,07 inside brackets, found {item!r} in {whole!r}"
            raise HostlistError(msg)
        lo_s, hi_s = m.group(1), m.group(2)
        lo = int(lo_s)
        hi = int(hi_s) if hi_s is not None else lo
        if hi < lo:
            msg = f"expected an ascending range, found {item!r} in {whole!r}"
            raise HostlistError(msg)
        if hi - lo + 1 > MAX_NODES:
            msg = f"expected at most {MAX_NODES} nodes in a range, found {item!r}"
            raise HostlistError(msg)
        width = len(lo_s)
        out.extend(f"{n:0{width}d}" for n in range(lo, hi + 1))
    return out


def _expand_token(token: str, whole: str) -> list[str]:
    if token == "":
        msg = f"expected a node name between commas, found an empty one in {whole!r}"
        raise HostlistError(msg)
    results = [""]
    rest = token
    while rest:
        i = rest.find("[")
        if i < 0:
            prefix, choices, rest = rest, None, ""
        else:
            j = rest.find("]", i)
            prefix, choices, rest = rest[:i], _expand_ranges(rest[i + 1 : j], whole), rest[j + 1 :]
        if not _NAME_CHARS.match(prefix):
            msg = f"expected node names of letters, digits, '-', '_' or '.', found {token!r}"
            raise HostlistError(msg)
        results = [r + prefix for r in results]
        if choices is not None:
            results = [r + c for r in results for c in choices]
            if len(results) > MAX_NODES:
                msg = f"expected at most {MAX_NODES} nodes, found more in {whole!r}"
                raise HostlistError(msg)
    return results


@lru_cache(maxsize=65536)
def _expand_cached(expr: str) -> tuple[str, ...]:
    if expr in EMPTY_HOSTLISTS:
        return ()
    nodes: list[str] = []
    for token in _split_top(expr):
        nodes.extend(_expand_token(token, expr))
    return tuple(nodes)


def expand_hostlist(expr: str | None) -> list[str]:
    """Node names of a Slurm hostlist expression (``[]`` for ``None assigned`` or empty).

    Raises ``HostlistError`` with an "expected …, found …" message for malformed input.
    """
    if expr is None:
        return []
    return list(_expand_cached(expr.strip()))


def expand_hostlist_column(values: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Expand a String column of hostlists → (``List(String)`` nodes, String error or null).

    Works per distinct value; rows whose hostlist is malformed get an empty list and the error.
    """
    uniq = values.unique().drop_nulls().to_list()
    offsets = [0]
    flat: list[str] = []
    err_of: list[str | None] = []
    for u in uniq:
        try:
            flat.extend(_expand_cached(u.strip()))
            err_of.append(None)
        except HostlistError as exc:
            err_of.append(str(exc))
        offsets.append(len(flat))
    # built from offsets and values: far cheaper than a Series from a list of Python lists
    nodes_of = pl.from_arrow(pa.LargeListArray.from_arrays(
        pa.array(offsets, type=pa.int64()), pa.array(flat, type=pa.large_string())
    ))
    lookup = pl.DataFrame(
        {"_k": uniq, "_nodes": nodes_of, "_err": err_of},
        schema={"_k": pl.String, "_nodes": pl.List(pl.String), "_err": pl.String},
    )
    # a join to row positions, then gathers: cheaper than joining the list column itself
    index = (
        pl.DataFrame({"_k": values}, schema={"_k": pl.String}).lazy()
        .join(lookup.select("_k").with_row_index("_i").lazy(), on="_k", how="left",
              maintain_order="left")
        .collect()["_i"]
    )
    nodes = lookup["_nodes"].gather(index).fill_null(pl.lit([], dtype=pl.List(pl.String)))
    return nodes.alias("nodes"), lookup["_err"].gather(index).alias("nodes_error")
