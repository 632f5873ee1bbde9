"""The fixture twin of ``PrometheusHttpSource``: answer raw-sample reads from an OpenMetrics file.

The file is what ``promtool tsdb create-blocks-from openmetrics`` would backfill (timestamps in
seconds, ``# EOF`` at the end, plain or gzip). ``raw_samples`` returns exactly the frame the HTTP
source returns for the same selector and window once Prometheus has ingested that file, so tests
without a server and the real path share every line of downstream code. Stored the way
Prometheus stores it: sample names as written (``..._total``, ``..._bucket``), empty label values
dropped, timestamps rounded to milliseconds, no staleness markers.

Selectors: ``name``, ``name{l="v", l!="v", l=~"re", l!~"re"}`` and ``{__name__=~"re", ...}``;
regexes are fully anchored as in PromQL, a missing label matches ``""``.
"""

from __future__ import annotations

import bisect
import gzip
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl

from connectors.errors import SourceError
from connectors.kubernetes.prometheus import (
    check_selector,
    epoch_ms,
    finish_raw,
    frame_from_label_sets,
    order_series,
)
from connectors.kubernetes.records import SERIES_BASE

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_PAIR = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_MATCHER = re.compile(
    r"""\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\s*,?"""
)
_UNESCAPE = re.compile(r"\\(.)")


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


@dataclass
class _Series:
    name: str
    labels: dict[str, str]  # without __name__, empty values dropped
    ts_ms: list[int]
    values: list[float]
    ordered: bool = True  # timestamps non-decreasing (as promtool requires per series)


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str  # = != =~ !~
    value: str

    def matches(self, labels: dict[str, str]) -> bool:
        have = labels.get(self.label, "")
        if self.op == "=":
            return have == self.value
        if self.op == "!=":
            return have != self.value
        hit = re.fullmatch(self.value, have) is not None
        return hit if self.op == "=~" else not hit


def parse_selector(selector: str) -> list[Matcher]:
    """PromQL vector selector -> matchers (the metric name becomes ``__name__ = name``)."""
    text = check_selector(selector)
    matchers: list[Matcher] = []
    name = _NAME.match(text)
    rest = text
    if name:
        matchers.append(Matcher("__name__", "=", name.group(0)))
        rest = text[name.end():].strip()
    if rest:
        if not (rest.startswith("{") and rest.endswith("}")):
            msg = f"expected {{matchers}} after the metric name, found {rest!r}"
            raise ValueError(msg)
        body = rest[1:-1]
        pos = 0
        while pos < len(body):
            if not body[pos:].strip():
                break
            m = _MATCHER.match(body, pos)
            if m is None:
                msg = f"cannot parse the label matcher at {body[pos:]!r} in {selector!r}"
                raise ValueError(msg)
            raw = m.group(3) if m.group(3) is not None else m.group(4)
            matchers.append(Matcher(m.group(1), m.group(2), _unescape(raw)))
            pos = m.end()
    if not matchers:
        msg = f"expected at least one matcher in {selector!r}"
        raise ValueError(msg)
    return matchers


class OpenMetricsFileSource:
    """`MetricsSource` over an OpenMetrics file (parsed once, on first use, kept in memory)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._by_name: dict[str, list[_Series]] | None = None

    # ------------------------------------------------------------------ parsing

    def _open(self):
        try:
            with self.path.open("rb") as fh:
                magic = fh.read(2)
        except OSError as exc:
            msg = f"expected an OpenMetrics file at {self.path}: {exc}"
            raise SourceError(msg) from exc
        if self.path.suffix == ".gz" or magic == b"\x1f\x8b":
            return gzip.open(self.path, "rt", encoding="utf-8")
        return self.path.open(encoding="utf-8")

    def _load(self) -> dict[str, list[_Series]]:
        if self._by_name is not None:
            return self._by_name
        index: dict[str, _Series] = {}  # raw "name{labels}" -> series
        by_name: dict[str, list[_Series]] = {}
        with self._open() as fh:
            for line_no, raw in enumerate(fh, 1):
                line = raw.rstrip("\n")
                if not line or line[0] == "#":
                    if line.startswith("# EOF"):
                        break
                    continue
                key, value, ts = self._split(line, line_no)
                series = index.get(key)
                if series is None:
                    series = self._new_series(key, line_no)
                    index[key] = series
                    by_name.setdefault(series.name, []).append(series)
                if series.ts_ms and ts < series.ts_ms[-1]:
                    series.ordered = False
                series.ts_ms.append(ts)
                series.values.append(value)
        self._by_name = by_name
        return by_name

    def _split(self, line: str, line_no: int) -> tuple[str, float, int]:
        """(``name{labels}`` as written, value, timestamp in ms) of a sample line."""
        if " # {" in line:  # an exemplar follows the sample
            line = line[: line.rfind(" # {")]
        brace = line.find("{")
        space = line.find(" ")
        if brace != -1 and (space == -1 or brace < space):
            close = line.rfind("}")  # value and timestamp never contain a brace
            if close < brace:
                self._fail(line_no, "an unterminated label set", line)
            key, rest = line[: close + 1], line[close + 1 :]
        else:
            if space == -1:
                self._fail(line_no, "a value after the metric name", line)
            key, rest = line[:space], line[space:]
        parts = rest.split()
        if len(parts) < 2:
            self._fail(line_no, "a value and a timestamp (seconds)", line)
        try:
            value = float(parts[0])
            ts = round(float(parts[1]) * 1000)
        except ValueError:
            self._fail(line_no, "a number value and timestamp", line)
        return key, value, ts

    def _new_series(self, key: str, line_no: int) -> _Series:
        brace = key.find("{")
        name = key if brace == -1 else key[:brace]
        if not _NAME.fullmatch(name):
            self._fail(line_no, "a metric name", key)
        labels: dict[str, str] = {}
        if brace != -1:
            body = key[brace + 1 : -1]
            pos = 0
            while pos < len(body):
                m = _LABEL_PAIR.match(body, pos)
                if m is None:
                    if body[pos:].strip(" ,"):
                        self._fail(line_no, "label=\"value\" pairs", key)
                    break
                value = _unescape(m.group(2))
                if value != "":  # Prometheus drops empty-valued labels on ingest
                    labels[m.group(1)] = value
                pos = m.end()
        return _Series(name=name, labels=labels, ts_ms=[], values=[])

    def _fail(self, line_no: int, expected: str, found: str):
        msg = f"{self.path}:{line_no}: expected {expected}, found {found[:200]!r}"
        raise SourceError(msg)

    # ------------------------------------------------------------------ selection

    def _select(self, selector: str) -> list[_Series]:
        matchers = parse_selector(selector)
        by_name = self._load()
        name_eq = next(
            (m.value for m in matchers if m.label == "__name__" and m.op == "="), None
        )
        candidates = by_name.get(name_eq, []) if name_eq is not None else [
            s for group in by_name.values() for s in group
        ]
        out = []
        for s in candidates:
            labels = {**s.labels, "__name__": s.name}
            if all(m.matches(labels) for m in matchers):
                out.append(s)
        return out

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        lo, hi = epoch_ms(start), epoch_ms(end)
        label_sets: list[dict[str, str]] = []
        counts: list[int] = []
        ts_parts: list[int] = []
        value_parts: list[float] = []
        for s in self._select(selector):
            if s.ordered:
                i, j = bisect.bisect_left(s.ts_ms, lo), bisect.bisect_left(s.ts_ms, hi)
                ts_parts.extend(s.ts_ms[i:j])
                value_parts.extend(s.values[i:j])
                n = j - i
            else:
                n = 0
                for t, v in zip(s.ts_ms, s.values, strict=True):
                    if lo <= t < hi:
                        ts_parts.append(t)
                        value_parts.append(v)
                        n += 1
            if n:
                label_sets.append({**s.labels, "__name__": s.name})
                counts.append(n)
        frame = frame_from_label_sets(
            label_sets,
            counts,
            pl.Series("ts", ts_parts, dtype=pl.Int64),
            pl.Series("value", value_parts, dtype=pl.Float64),
        )
        return finish_raw([frame], start, end)

    def series(self, match: str, start: datetime, end: datetime) -> pl.DataFrame:
        lo, hi = epoch_ms(start), epoch_ms(end)
        rows = [
            {**s.labels, "__name__": s.name}
            for s in self._select(match)
            if any(lo <= t < hi for t in s.ts_ms)
        ]
        if not rows:
            return pl.DataFrame(schema=SERIES_BASE)
        keys = sorted({k for r in rows for k in r})
        frame = pl.DataFrame(
            {k: [r.get(k) for r in rows] for k in keys}, schema=dict.fromkeys(keys, pl.String)
        )
        return order_series(frame)
