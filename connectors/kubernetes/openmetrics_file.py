"""The fixture twin of ``PrometheusHttpSource``: answer raw-sample reads from an OpenMetrics file.

The file is what ``promtool tsdb create-blocks-from openmetrics`` would backfill (timestamps in
seconds, ``# EOF`` at the end, plain or gzip). ``raw_samples`` returns exactly the frame the HTTP
source returns for the same selector and window once Prometheus has ingested that file, so tests
without a server and the real path share every line of downstream code. Stored the way
Prometheus stores it: sample names as written (``..._total``, ``..._bucket``), empty label values
dropped, timestamps rounded to milliseconds, no staleness markers.

Selectors (``promql_selectors``): ``name``, ``name{l="v", l!="v", l=~"re", l!~"re"}`` and
``{__name__=~"re", ...}``; regexes are fully anchored as in PromQL, a missing label matches
``""``. A selector with an equality (``l="v"``) or a regex that is an alternation of literals
(``uid=~"a|b|c"``, how the ingest asks for pods by uid) is answered from a per-label index built
once per (name, label) (12 bytes a series), so reading a file's pods chunk by chunk is linear in
its series, not quadratic (issue #28: 10 k series took 16 s, 100 k 521 s). The parsed file lives
on disk in a ``SeriesStore`` (``openmetrics_store``), not in Python objects (issue #28: 1 M
series were killed at 7.0 GB): Python keeps ~30 bytes a series (offsets, name ids), and the
process's peak RSS grows ~240 bytes a series (``benchmarks/openmetrics_scale``: 1 M series,
467 MiB). ``close()`` releases it.

Values are what Python's ``float`` reads (no ``_`` digit separators): ``NaN``, ``+Inf`` and
``-Inf`` are legal and kept as such in ``value`` (consumers decide what they mean). Timestamps
must be finite seconds below 1e11 (a file in milliseconds is refused line by line).

Bad lines, ``source.rejects``: a sample line that cannot be read does not abort the file. It is
skipped and kept in ``rejects``, a list of ``connectors.errors.Reject`` in file order, with
``source="openmetrics"``, ``source_file`` the file's resolved path (``str(path.resolve())``, the
key ``gpuledger.ingest.kubernetes.run`` replaces earlier rejects of the file by), ``line_no``
(1-based),
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

import gzip
import math
import re
import zlib
from array import array
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TextIO

import polars as pl

from connectors.errors import Reject, SourceError
from connectors.kubernetes.openmetrics_store import SeriesStore
from connectors.kubernetes.promql_selectors import (
    METRIC_NAME,
    Matcher,
    literal_values,
    parse_selector,
    unescape,
)
from connectors.kubernetes.records import SERIES_BASE
from connectors.kubernetes.sample_frames import finish_raw, frame_from_label_sets, order_series
from connectors.times import epoch_ms

_LABEL_PAIR = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_TOKEN = re.compile(r"[^{\s]*")
SOURCE = "openmetrics"
MAX_TS_S = 1e11  # seconds (year 5138): beyond that the file is in milliseconds (or garbage)
RAW_CHARS = 4096  # longest raw line kept in a reject
PARSE_BATCH = 50_000  # sample lines the parser hands the store at a time
CACHED_KEYS = 100_000  # keys the parser remembers (then forgets: bounded memory)
INDEX_CHUNK = 100_000  # series per chunk while a label index is built


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


class OpenMetricsFileSource:
    """`MetricsSource` over an OpenMetrics file (parsed once, on first use, into a
    ``SeriesStore``: memory that does not grow with the file).

    ``rejects``: the file's unreadable sample lines (see the module docstring).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._store: SeriesStore | None = None
        self._rejects: list[Reject] = []
        # (metric name or None, label) -> hash of the label's value and series id, sorted by
        # hash (12 bytes a series; the caller checks every matcher, so a collision costs nothing)
        self._indexes: dict[tuple[str | None, str], pl.DataFrame] = {}

    @property
    def rejects(self) -> list[Reject]:
        """Unreadable sample lines of the file, in file order (parses the file if needed)."""
        self._load()
        return self._rejects

    def close(self) -> None:
        """Release the parsed store (its scratch files); the next read parses the file again."""
        if self._store is not None:
            self._store.close()
            self._store = None
            self._indexes.clear()

    # ------------------------------------------------------------------ parsing

    def _open(self) -> TextIO:
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

    def _load(self) -> SeriesStore:
        if self._store is not None:
            return self._store
        store = SeriesStore()
        try:
            rejects, good = self._parse_into(store)
            if good == 0 or len(rejects) > good:
                first = f"; first: {rejects[0].describe()}" if rejects else ""
                msg = (f"expected an OpenMetrics file at {self.path} (sample lines "
                       f"'name{{labels}} value timestamp'), found {good} readable and "
                       f"{len(rejects)} unreadable sample line(s){first}")
                raise SourceError(msg)
            store.finish()
        except BaseException:
            store.close()
            raise
        self._store = store
        self._rejects = rejects
        return store

    def _parse_into(self, store: SeriesStore) -> tuple[list[Reject], int]:
        """Stream the file's sample lines into `store`: (rejects, readable sample lines)."""
        rejects: list[Reject] = []
        source_file = str(self.path.resolve())
        good = 0
        # key -> provisional series id, or why its labels cannot be read; bounded (a key met
        # again after the cache was cleared gets a second id, merged by the store)
        ids: dict[str, int | tuple[str, str]] = {}
        pids, stamps, values, seqs = array("q"), array("q"), array("d"), array("q")
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
                        pid = ids.get(key)
                        if pid is None:
                            if len(ids) >= CACHED_KEYS:
                                ids.clear()
                            try:
                                _labels_of(key)
                                pid = store.new_key(key)
                            except _BadLine as bad:
                                pid = (bad.field, bad.reason)
                            ids[key] = pid
                        if isinstance(pid, tuple):
                            raise _BadLine(field=pid[0], reason=pid[1])
                    except _BadLine as bad:
                        rejects.append(Reject(SOURCE, source_file, line_no, bad.field,
                                              bad.reason, _raw_text(line)))
                        continue
                    good += 1
                    pids.append(pid)
                    stamps.append(ts)
                    values.append(value)
                    seqs.append(line_no)
                    if len(seqs) >= PARSE_BATCH:
                        store.add_lines(pids, stamps, values, seqs)
                        pids, stamps, values, seqs = array("q"), array("q"), array("d"), array("q")
                store.add_lines(pids, stamps, values, seqs)
        except (OSError, EOFError, zlib.error) as exc:  # truncated or corrupt gzip, I/O error
            msg = f"expected a readable OpenMetrics file at {self.path}, found {exc}"
            raise SourceError(msg) from exc
        return rejects, good

    @staticmethod
    def _split(line: str) -> tuple[str, float, int]:
        """(``name{labels}`` as written, value, timestamp in ms) of a sample line."""
        if " # {" in line:  # an exemplar follows the sample
            line = line[: line.rfind(" # {")]
        name = METRIC_NAME.match(line)
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

    # ------------------------------------------------------------------ selection

    def _labels(self, sid: int) -> dict[str, str]:
        """The series' labels with ``__name__`` (read back from its key)."""
        store = self._load()
        return {**_labels_of(store.key(sid)), "__name__": store.name(sid)}

    def _pool(self, name: str | None) -> Iterable[int]:
        store = self._load()
        if name is not None:
            return store.by_name.get(name, ())
        return range(len(store))

    def _select(self, selector: str) -> list[tuple[int, dict[str, str]]]:
        """(series id, labels) of every series the selector matches, in series order."""
        matchers = parse_selector(selector)
        store = self._load()
        name_eq = next(
            (m.value for m in matchers if m.label == "__name__" and m.op == "="), None
        )
        candidates = self._indexed(name_eq, matchers)
        if candidates is None:
            name_matchers = [m for m in matchers if m.label == "__name__"]
            if name_eq is None and name_matchers:  # {__name__=~"re"}: test each name once
                names = [n for n in store.names
                         if all(m.matches({"__name__": n}) for m in name_matchers)]
                found: Iterable[int] = sorted(s for n in names for s in store.by_name[n])
            else:
                found = self._pool(name_eq)
        else:
            found = candidates
        out = []
        for sid in found:
            labels = self._labels(sid)
            if all(m.matches(labels) for m in matchers):
                out.append((sid, labels))
        return out

    def _indexed(self, name: str | None, matchers: list[Matcher]) -> list[int] | None:
        """The series an equality or literal-alternation matcher can name, from the index of
        (name, label) (built on first use: one pass over the name's series); None when no
        matcher can use an index. The caller still checks every matcher."""
        for m in matchers:
            if m.label == "__name__":
                continue
            values = literal_values(m)
            if values is None:
                continue
            key = (name, m.label)
            index = self._indexes.get(key)
            if index is None:
                index = self._indexes[key] = self._build_index(name, m.label)
            hashes = index["h"]
            wanted = pl.Series("h", sorted({hash(v) for v in values}), dtype=pl.Int64)
            lo = hashes.search_sorted(wanted, side="left")
            hi = hashes.search_sorted(wanted, side="right")
            sids = index["sid"]
            found: set[int] = set()
            for i, j in zip(lo.to_list(), hi.to_list(), strict=True):
                if j > i:
                    found.update(sids.slice(i, j - i).to_list())
            return sorted(found)
        return None

    def _build_index(self, name: str | None, label: str) -> pl.DataFrame:
        parts = []
        hashes: list[int] = []
        sids: list[int] = []
        for sid in self._pool(name):
            value = self._labels(sid).get(label)
            if value is not None:
                hashes.append(hash(value))
                sids.append(sid)
            if len(sids) >= INDEX_CHUNK:
                parts.append(pl.DataFrame({"h": hashes, "sid": sids},
                                          schema={"h": pl.Int64, "sid": pl.UInt32}))
                hashes, sids = [], []
        parts.append(pl.DataFrame({"h": hashes, "sid": sids},
                                  schema={"h": pl.Int64, "sid": pl.UInt32}))
        return pl.concat(parts).sort("h")

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        lo, hi = epoch_ms(start), epoch_ms(end)
        store = self._load()
        label_sets: list[dict[str, str]] = []
        counts: list[int] = []
        ts_parts = array("q")
        value_parts = array("d")
        for sid, labels in self._select(selector):
            ts, values = store.window(sid, lo, hi)
            if ts:
                ts_parts.extend(ts)
                value_parts.extend(values)
                label_sets.append(labels)
                counts.append(len(ts))
        frame = frame_from_label_sets(
            label_sets,
            counts,
            pl.Series("ts", ts_parts, dtype=pl.Int64),
            pl.Series("value", value_parts, dtype=pl.Float64),
        )
        return finish_raw([frame], start, end)

    def series(self, match: str, start: datetime, end: datetime) -> pl.DataFrame:
        lo, hi = epoch_ms(start), epoch_ms(end)
        store = self._load()
        rows = [labels for sid, labels in self._select(match) if store.any_in(sid, lo, hi)]
        if not rows:
            return pl.DataFrame(schema=SERIES_BASE)
        keys = sorted({k for r in rows for k in r})
        frame = pl.DataFrame(
            {k: [r.get(k) for r in rows] for k in keys}, schema=dict.fromkeys(keys, pl.String)
        )
        return order_series(frame)


def _labels_of(key: str) -> dict[str, str]:
    """The labels of a ``name{labels}`` key, without ``__name__`` and empty values (dropped as
    Prometheus drops them on ingest); ``_BadLine`` when the label set cannot be read."""
    brace = key.find("{")
    labels: dict[str, str] = {}
    if brace == -1:
        return labels
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
        value = unescape(m.group(2))
        if value != "":
            labels[label] = value
        pos = m.end()
    return labels
