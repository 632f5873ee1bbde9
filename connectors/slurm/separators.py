"""Lines with more fields than the header: stray separators in free-text fields.

Stray separators (``|`` in names under plain ``-P``)
-----------------------------------------------------
Lines are split with vectorized Polars; only lines whose separator count differs from the header's
go through a Python path:

- fewer fields than the header → rejected;
- more fields and exactly one free-text field (:data:`FREE_TEXT_FIELDS`) in the header → the extra
  separators belong to it without doubt;
- more fields and several free-text fields → every placement of the extra separators among them is
  tried; a placement is kept when every other field parses (State, times, ids, TRES, numbers,
  NodeList …) and the free-text fields are plausible (AdminComment empty, JSON or a jobstats
  ``JS1:`` blob; WCKey a single word). Exactly one such placement → the line loads; several → the
  ones under which the fields nobody reads also have sacct's shapes
  (:mod:`connectors.slurm.shapes`, for ``--format=ALL``) are kept, exactly one → the line loads;
  otherwise rejected ("ambiguous: 1 extra separator(s) could belong to JobName or Comment").
  Columns are never shifted silently.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import polars as pl

from connectors.errors import Reject
from connectors.slurm.header import FREE_TEXT_FIELDS, field_of
from connectors.slurm.sacct_bytes import SOURCE
from connectors.slurm.sacct_typing import bad_any, order_checks, problem_of, raw_frame, typed_fields
from connectors.slurm.shapes import shape_ok

MAX_PLACEMENTS = 2_000


def _compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """All ways to write ``total`` as an ordered sum of ``parts`` non-negative integers."""
    for cut in itertools.combinations(range(total + parts - 1), parts - 1):
        bounds = (-1, *cut, total + parts - 1)
        yield tuple(b - a - 1 for a, b in itertools.pairwise(bounds))


def _assemble(tokens: list[str], n_fields: int, free_pos: list[int], extra: tuple[int, ...],
              sep: str) -> list[str]:
    give = dict(zip(free_pos, extra, strict=True))
    values: list[str] = []
    p = 0
    for i in range(n_fields):
        take = give.get(i, 0) + 1
        values.append(sep.join(tokens[p : p + take]))
        p += take
    return values


def _plausible_free_text(name: str, value: str) -> bool:
    if name == "AdminComment":
        if value == "" or value.startswith("JS1:"):
            return "|" not in value and " " not in value
        try:
            json.loads(value)
        except ValueError:
            return False
        return True
    if name == "WCKey":
        return all(not ch.isspace() for ch in value) and "|" not in value
    return True


def split_lines(lines: pl.DataFrame, sep: str, n_fields: int) -> tuple[pl.DataFrame, pl.Series]:
    """Split every line into ``f0`` … ``f{n-1}`` (vectorized) and tell which lines fit.

    A line fits when it has exactly ``n_fields`` fields. Returns (split frame, fits mask); the
    columns of lines that do not fit hold whatever the split gave and are dropped by the caller.
    """
    parts = pl.col("_l")
    split = (
        lines.lazy()
        .select(pl.col("line_no").cast(pl.Int64), pl.col("line").str.split(sep).alias("_l"))
        .select(
            "line_no",
            *(parts.list.get(i, null_on_oob=True).alias(f"f{i}") for i in range(n_fields)),
            (parts.list.len() == n_fields).alias("_fits"),
        )
        .collect()
    )
    return split.drop("_fits"), split["_fits"]


Meta = tuple[int, int, str, tuple[str, ...]]


def placement_candidates(odd: pl.DataFrame, header: list[str | None], sep: str, source_file: str
                         ) -> tuple[pl.DataFrame, list[Meta], list[Reject]]:
    """Candidate rows for lines with more fields than the header; rejects for the hopeless ones.

    Returns (candidate frame with ``line_no``, ``_cand`` and ``f0``…, per-line meta, rejects);
    meta is (line_no, number of candidates, description, free-text field names).
    """
    n = len(header)
    free_pos = [i for i, name in enumerate(header) if field_of(name) in FREE_TEXT_FIELDS]
    free_names = tuple(str(header[i]) for i in free_pos)
    rows: list[list[object]] = []
    meta: list[Meta] = []
    rejects: list[Reject] = []
    for line_no, line in odd.select("line_no", "line").iter_rows():
        tokens = line.split(sep)
        k = len(tokens) - n
        if k < 0:
            rejects.append(Reject(SOURCE, source_file, line_no, "line",
                                  f"expected {n} fields separated by {sep!r}, found {len(tokens)}",
                                  line))
            continue
        if not free_pos:
            rejects.append(Reject(SOURCE, source_file, line_no, "line",
                                  f"expected {n} fields separated by {sep!r}, found {len(tokens)}"
                                  " and no free-text field (JobName, AdminComment, …) in the "
                                  "header to hold the extra separators", line))
            continue
        placements = list(itertools.islice(_compositions(k, len(free_pos)), MAX_PLACEMENTS + 1))
        if len(placements) > MAX_PLACEMENTS:
            rejects.append(Reject(SOURCE, source_file, line_no, "line",
                                  f"expected {n} fields, found {len(tokens)}: too many ways "
                                  f"(>{MAX_PLACEMENTS}) to place {k} extra separators in "
                                  f"{' or '.join(free_names)}", line))
            continue
        for ci, extra in enumerate(placements):
            rows.append([line_no, ci, *_assemble(tokens, n, free_pos, extra, sep)])
        meta.append((line_no, len(placements), f"{k} extra separator(s)", free_names))
    schema = {"line_no": pl.Int64, "_cand": pl.Int64, **{f"f{i}": pl.String for i in range(n)}}
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    return frame, meta, rejects


def choose_placements(cands: pl.DataFrame, meta: list[Meta],
                      header: list[str | None], present: set[str], timezone: str, source_file: str,
                      raw_of: dict[int, str]) -> tuple[pl.DataFrame, list[Reject]]:
    """Keep, per line, the one candidate that parses; reject lines with none or several."""
    if cands.height == 0:
        return cands, []
    raw = raw_frame(cands.drop("_cand"), header).with_columns(cands["_cand"])
    typed, checks = typed_fields(raw.drop("_cand"), present, timezone)
    ok = typed.select(~bad_any(checks)).to_series()
    free = [(str(h), f"f{i}") for i, h in enumerate(header) if field_of(h) in FREE_TEXT_FIELDS]
    plausible = [
        all(_plausible_free_text(str(field_of(name)), v or "")
            for (name, _), v in zip(free, vals, strict=True))
        for vals in cands.select([c for _, c in free]).iter_rows()
    ]
    good = [bool(a) and b for a, b in zip(ok.to_list(), plausible, strict=True)]
    by_line: dict[int, list[int]] = {}
    for idx, (line_no, is_good) in enumerate(zip(cands["line_no"].to_list(), good, strict=True)):
        if is_good:
            by_line.setdefault(line_no, []).append(idx)
    keep: list[int] = []
    rejects: list[Reject] = []
    ordered = order_checks(checks, header)
    typed_rows = typed.to_dicts()
    raw_rows = raw.to_dicts()
    cands_rows = cands.to_dicts()
    first_idx: dict[int, int] = {}
    for idx, line_no in enumerate(cands["line_no"].to_list()):
        first_idx.setdefault(line_no, idx)
    names = getattr(header, "names", ())
    shaped_ok = shape_ok(cands, names) if names else [False] * cands.height
    for line_no, n_cand, what, free_names in meta:
        chosen = by_line.get(line_no, [])
        if n_cand == 1:
            # one free-text field: the extra separators are its own; ordinary validation decides
            keep.append(first_idx[line_no])
        elif len(chosen) == 1:
            keep.append(chosen[0])
        elif len(shaped := [c for c in chosen if shaped_ok[c]]) == 1:
            keep.append(shaped[0])  # the fields nobody reads tell (connectors.slurm.shapes)
        elif not chosen:
            i = first_idx[line_no]
            fld, why = problem_of(typed_rows[i], raw_rows[i], ordered, timezone)
            if fld == "line":  # every field parsed; a free-text field was implausible
                fld, why = next(
                    (name, f"implausible text {cands_rows[i][col]!r}") for name, col in free
                    if not _plausible_free_text(str(field_of(name)), cands_rows[i][col] or "")
                )
            rejects.append(Reject(SOURCE, source_file, line_no, "line",
                                  f"expected {len(header)} fields; {what} fit no placement in "
                                  f"{' or '.join(free_names)} that makes every other field valid "
                                  f"(first placement: {fld}: {why})", raw_of[line_no]))
        else:
            chosen = shaped or chosen
            holders = [name for name in free_names
                       if len({cands_rows[c][f"f{header.index(name)}"] for c in chosen}) > 1]
            rejects.append(Reject(SOURCE, source_file, line_no, "line",
                                  f"ambiguous: {what} could belong to {' or '.join(holders)} "
                                  f"({len(chosen)} placements give valid fields)",
                                  raw_of[line_no]))
    chosen_frame = cands[keep].drop("_cand") if keep else cands.clear().drop("_cand")
    return chosen_frame, rejects
