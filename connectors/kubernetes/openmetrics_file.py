"""The fixture twin of ``PrometheusHttpSource``: answer raw-sample reads from an OpenMetrics file.

The file is what ``promtool tsdb create-blocks-from openmetrics`` would backfill (timestamps in
seconds, ``# EOF`` at the end, plain or gzip). ``raw_samples`` returns exactly the frame the HTTP
source returns for the same selector and window once Prometheus has ingested that file, so tests
without a server and the real path share every line of downstream code. Stored the way
Prometheus stores it: sample names as written (``..._total``, ``..._bucket``), empty label values
dropped, timestamps rounded to milliseconds, no staleness markers.

Selectors: ``name``, ``name{l="v", l!="v", l=~"re", l!~"re"}`` and ``{__name__=~"re", ...}``;
regexes are fully anchored as in PromQL, a missing label matches ``""``. A selector with an
equality (``l="v"``) or a regex that is an alternation of literals (``uid=~"a|b|c"``, how the
ingest asks for pods by uid) is answered from a per-label index built once per (name, label),
so reading a file's pods chunk by chunk is linear in its series, not quadratic (issue #28: 10 k
series took 16 s, 100 k 521 s). Samples are kept in typed arrays (8 bytes per timestamp and
per value).

Values are what Python's ``float`` reads (no ``_`` digit separators): ``NaN``, ``+Inf`` and
``-Inf`` are legal and kept as such in ``value`` (consumers decide what they mean). Timestamps
must be finite seconds below 1e11 (a file in milliseconds is refused line by line).

Bad lines, ``source.rejects``: a sample line that cannot be read does not abort the file. It is
skipped and kept in ``rejects``, a list of ``connectors.errors.Reject`` in file order, with
``source="openmetrics"``, ``source_file`` the file's resolved path (``str(path.resolve())``, the
key ``gpuledger.k8s_ingest`` replaces earlier rejects of the file by), ``line_no`` (1-based),
``field`` (``name``, ``labels``, ``value``, ``timestamp`` or ``line``: undecodable bytes or text
after the timestamp), ``reason`` ("expected ..., found ...") and ``raw``, the line as read
(undecodable bytes replaced by U+FFFD, cut at 4096 characters). Reading ``rejects`` parses the
file if no read has yet (so it may raise ``SourceError`` like a read); it is complete from then
on and does not change. Comment, ``# HELP``/``# TYPE``/``# UNIT`` and blank lines are not samples
and never rejected; nothing after ``# EOF`` is read.

The whole file is refused (``SourceError``) when it cannot be opened or decompressed, holds no
readable sample line, or holds more unreadable sample lines than readable ones: that is not an
OpenMetrics file with a few bad lines but another format (or binary garbage).
"""

from __future__ import annotations

import bisect
import gzip
import math
import re
import zlib
from array import array
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

from connectors.errors import Reject, SourceError
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
_TOKEN = re.compile(r"[^{\s]*")
SOURCE = "openmetrics"
MAX_TS_S = 1e11  # seconds (year 5138): beyond that the file is in milliseconds (or garbage)
RAW_CHARS = 4096  # longest raw line kept in a reject


class _BadLine(Exception):  # an internal signal: never leaves this module
    """A sample line that cannot be read: which field and why ("expected ..., found ...")."""

    def __init__(self, *, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field, self.reason = field, reason


def _number(text: str) -> float | None:
    """`text` as a float (NaN, +Inf, -Inf included), or None; no ``_`` separators."""
    if "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _shown(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def _check_text(line: str) -> None:
    """A non-ASCII line read with surrogateescape: refuse it if it held bytes that are not UTF-8."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = f"expected UTF-8 text, found undecodable bytes at character {exc.start}"
        raise _BadLine(field="line", reason=msg) from None


def _raw_text(line: str) -> str:
    """`line` as storable text: undecodable bytes as U+FFFD, at most RAW_CHARS characters."""
    if not line.isascii():
        line = line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return line[:RAW_CHARS]


@dataclass
class _Series:
    name: str
    labels: dict[str, str]  # without __name__, empty values dropped
    ts_ms: array = field(default_factory=lambda: array("q"))
    values: array = field(default_factory=lambda: array("d"))
    ordered: bool = True  # timestamps non-decreasing (as promtool requires per series)

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        """The index range of the samples in ``[lo, hi)`` (ordered series)."""
        return bisect.bisect_left(self.ts_ms, lo), bisect.bisect_left(self.ts_ms, hi)

    def any_in(self, lo: int, hi: int) -> bool:
        if self.ordered:
            i, j = self.span(lo, hi)
            return j > i
        return any(lo <= t < hi for t in self.ts_ms)


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


_REGEX_META = frozenset(".^$*+?()[]{}|")


def _literal_values(m: Matcher) -> list[str] | None:
    """The label values a matcher accepts when they are a finite list of non-empty literals
    (``l="v"``; ``l=~"a|b|c"``, punctuation escaped as ``\\.`` or ``\\-`` allowed), else None."""
    if m.op == "=":
        return [m.value] if m.value else None
    if m.op != "=~":
        return None
    out: list[str] = []
    current: list[str] = []
    chars = iter(m.value)
    for c in chars:
        if c == "\\":
            nxt = next(chars, "")
            if not nxt or nxt.isalnum():  # \d, \w …: a class, not a literal
                return None
            current.append(nxt)
        elif c == "|":
            if not current:
                return None
            out.append("".join(current))
            current = []
        elif c in _REGEX_META:
            return None
        else:
            current.append(c)
    if not current:
        return None
    out.append("".join(current))
    return out


class OpenMetricsFileSource:
    """`MetricsSource` over an OpenMetrics file (parsed once, on first use, kept in memory).

    ``rejects``: the file's unreadable sample lines (see the module docstring).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._by_name: dict[str, list[_Series]] | None = None
        self._rejects: list[Reject] = []
        # (metric name or None, label) -> label value -> series: _indexed
        self._indexes: dict[tuple[str | None, str], dict[str, list[_Series]]] = {}

    @property
    def rejects(self) -> list[Reject]:
        """Unreadable sample lines of the file, in file order (parses the file if needed)."""
        self._load()
        return self._rejects

    # ------------------------------------------------------------------ parsing

    def _open(self):
        try:
            with self.path.open("rb") as fh:
                magic = fh.read(2)
        except OSError as exc:
            msg = f"expected an OpenMetrics file at {self.path}: {exc}"
            raise SourceError(msg) from exc
        # surrogateescape: a line with bytes that are not UTF-8 is rejected, not the whole file
        if self.path.suffix == ".gz" or magic == b"\x1f\x8b":
            return gzip.open(self.path, "rt", encoding="utf-8", errors="surrogateescape")
        return self.path.open(encoding="utf-8", errors="surrogateescape")

    def _load(self) -> dict[str, list[_Series]]:
        if self._by_name is not None:
            return self._by_name
        index: dict[str, _Series] = {}  # raw "name{labels}" -> series
        by_name: dict[str, list[_Series]] = {}
        rejects: list[Reject] = []
        source_file = str(self.path.resolve())
        good = 0
        try:
            with self._open() as fh:
                for line_no, raw in enumerate(fh, 1):
                    line = raw.rstrip("\n")
                    if not line or line[0] == "#":
                        if line.startswith("# EOF"):
                            break
                        continue
                    try:
                        if not line.isascii():
                            _check_text(line)
                        key, value, ts = self._split(line)
                        series = index.get(key)
                        if series is None:
                            series = self._new_series(key)
                            index[key] = series
                            by_name.setdefault(series.name, []).append(series)
                    except _BadLine as bad:
                        rejects.append(Reject(SOURCE, source_file, line_no, bad.field,
                                              bad.reason, _raw_text(line)))
                        continue
                    good += 1
                    if series.ts_ms and ts < series.ts_ms[-1]:
                        series.ordered = False
                    series.ts_ms.append(ts)
                    series.values.append(value)
        except (OSError, EOFError, zlib.error) as exc:  # truncated or corrupt gzip, I/O error
            msg = f"expected a readable OpenMetrics file at {self.path}, found {exc}"
            raise SourceError(msg) from exc
        if good == 0 or len(rejects) > good:
            first = f"; first: {rejects[0].describe()}" if rejects else ""
            msg = (f"expected an OpenMetrics file at {self.path} (sample lines "
                   f"'name{{labels}} value timestamp'), found {good} readable and "
                   f"{len(rejects)} unreadable sample line(s){first}")
            raise SourceError(msg)
        self._by_name = by_name
        self._rejects = rejects
        return by_name

    @staticmethod
    def _split(line: str) -> tuple[str, float, int]:
        """(``name{labels}`` as written, value, timestamp in ms) of a sample line."""
        if " # {" in line:  # an exemplar follows the sample
            line = line[: line.rfind(" # {")]
        name = _NAME.match(line)
        end = name.end() if name else 0
        if name is None or (end < len(line) and line[end] != "{" and not line[end].isspace()):
            token = _TOKEN.match(line)
            found = token.group(0) if token and token.group(0) else line
            msg = f"expected a metric name like [a-zA-Z_:][a-zA-Z0-9_:]*, found {_shown(found)}"
            raise _BadLine(field="name", reason=msg)
        if end < len(line) and line[end] == "{":
            close = line.rfind("}")  # value and timestamp never contain a brace
            if close < end:
                msg = f"expected a label set closed by '}}', found {_shown(line[end:])}"
                raise _BadLine(field="labels", reason=msg)
            key, rest = line[: close + 1], line[close + 1 :]
        else:
            key, rest = line[:end], line[end:]
        parts = rest.split()
        if not parts:
            msg = f"expected a value after {_shown(key)}, found nothing"
            raise _BadLine(field="value", reason=msg)
        if len(parts) == 1:
            msg = f"expected a timestamp (seconds) after the value {parts[0]!r}, found nothing"
            raise _BadLine(field="timestamp", reason=msg)
        if len(parts) > 2:
            msg = f"expected the end of the line after the timestamp, found {_shown(parts[2])}"
            raise _BadLine(field="line", reason=msg)
        value = _number(parts[0])
        if value is None:
            msg = f"expected a number, NaN, +Inf or -Inf as the value, found {_shown(parts[0])}"
            raise _BadLine(field="value", reason=msg)
        seconds = _number(parts[1])
        if seconds is None or not math.isfinite(seconds) or abs(seconds) >= MAX_TS_S:
            hint = " (milliseconds?)" if seconds is not None and math.isfinite(seconds) else ""
            msg = f"expected a timestamp in seconds, found {_shown(parts[1])}{hint}"
            raise _BadLine(field="timestamp", reason=msg)
        return key, value, round(seconds * 1000)

    @staticmethod
    def _new_series(key: str) -> _Series:
        brace = key.find("{")
        name = key if brace == -1 else key[:brace]
        labels: dict[str, str] = {}
        if brace != -1:
            body = key[brace + 1 : -1]
            pos = 0
            seen: set[str] = set()
            while pos < len(body):
                m = _LABEL_PAIR.match(body, pos)
                if m is None:
                    if body[pos:].strip(" ,"):
                        msg = f'expected label="value" pairs, found {_shown(body[pos:])}'
                        raise _BadLine(field="labels", reason=msg)
                    break
                label = m.group(1)
                if label in seen:
                    msg = f"expected each label once, found {label!r} twice"
                    raise _BadLine(field="labels", reason=msg)
                seen.add(label)
                value = _unescape(m.group(2))
                if value != "":  # Prometheus drops empty-valued labels on ingest
                    labels[label] = value
                pos = m.end()
        return _Series(name=name, labels=labels)

    # ------------------------------------------------------------------ selection

    def _select(self, selector: str) -> list[_Series]:
        matchers = parse_selector(selector)
        by_name = self._load()
        name_eq = next(
            (m.value for m in matchers if m.label == "__name__" and m.op == "="), None
        )
        candidates = self._indexed(name_eq, matchers)
        if candidates is None:
            candidates = by_name.get(name_eq, []) if name_eq is not None else [
                s for group in by_name.values() for s in group
            ]
        out = []
        for s in candidates:
            labels = {**s.labels, "__name__": s.name}
            if all(m.matches(labels) for m in matchers):
                out.append(s)
        return out

    def _indexed(self, name: str | None, matchers: list[Matcher]) -> list[_Series] | None:
        """The series an equality or literal-alternation matcher can name, from the index of
        (name, label) (built on first use: one pass over the name's series); None when no
        matcher can use an index. The caller still checks every matcher."""
        for m in matchers:
            if m.label == "__name__":
                continue
            values = _literal_values(m)
            if values is None:
                continue
            key = (name, m.label)
            index = self._indexes.get(key)
            if index is None:
                index = {}
                pool = self._load().get(name, []) if name is not None else [
                    s for group in self._load().values() for s in group]
                for s in pool:
                    value = s.labels.get(m.label)
                    if value is not None:
                        index.setdefault(value, []).append(s)
                self._indexes[key] = index
            found: dict[int, _Series] = {}
            for value in values:
                for s in index.get(value, ()):
                    found.setdefault(id(s), s)
            return list(found.values())
        return None

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        lo, hi = epoch_ms(start), epoch_ms(end)
        label_sets: list[dict[str, str]] = []
        counts: list[int] = []
        ts_parts: list[int] = []
        value_parts: list[float] = []
        for s in self._select(selector):
            if s.ordered:
                i, j = s.span(lo, hi)
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
            if s.any_in(lo, hi)
        ]
        if not rows:
            return pl.DataFrame(schema=SERIES_BASE)
        keys = sorted({k for r in rows for k in r})
        frame = pl.DataFrame(
            {k: [r.get(k) for r in rows] for k in keys}, schema=dict.fromkeys(keys, pl.String)
        )
        return order_series(frame)
