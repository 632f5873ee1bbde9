"""The on-disk series store behind ``OpenMetricsFileSource``: memory that does not grow with files.

Issue #28: holding every series as Python objects took ~4 KB per series (1 M series: killed at
7.0 GB). Here the parser gives each new ``name{labels}`` key a provisional id (its cache of keys
is bounded, so a key it forgot gets a second id) and appends sample lines to typed arrays that
go, in batches, to a scratch DuckDB database (its own memory limit, spilling to the scratch
folder). ``finish`` merges the provisional ids of one key into one series id, numbered in order of
first appearance, sorts the samples by (series, timestamp, line) and writes three flat files: the
keys (UTF-8, back to back), the timestamps (int64 ms) and the values (float64); DuckDB is closed.
In memory stay two offsets per series (16 bytes), its metric-name id and its place in its name's
list (8 bytes); a read fetches only the bytes of the series it selects (``os.pread``). The files
are unlinked as soon as they are open and the descriptors close with the store. The scratch
folder carries the parsing process's pid: a parse killed mid-way leaves it (its DuckDB build
file), and the next store removes the folders of processes that are gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import weakref
from array import array
from bisect import bisect_left
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from connectors.processes import process_alive

SCRATCH_PREFIX = "gpuledger-om-"  # + the writer's pid: folders of dead writers are swept
BATCH_LINES = 200_000  # sample lines per insert (32 bytes each in the buffers)
MEMORY_LIMIT = "128MB"  # DuckDB's while it merges and sorts (it spills beyond)
FETCH_ROWS = 65_536  # rows per batch when the sorted tables are written out


def _sweep_stale(folder: str) -> None:
    """Remove the scratch folders of stores whose process is gone: a kill during a parse
    leaves its DuckDB build file (the flat files are unlinked as soon as they are open)."""
    for path in Path(folder).glob(f"{SCRATCH_PREFIX}*-*"):
        pid = path.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _release(fds: list[int], work: str) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    shutil.rmtree(work, ignore_errors=True)


def _column(values: array[Any], kind: pa.DataType) -> pa.Array:
    """A typed array as an Arrow column without copying it."""
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def _fixed_bytes(column: pa.Array, width: int) -> memoryview:
    """The bytes of a fixed-width Arrow column without nulls (its slice of the data buffer)."""
    data = memoryview(column.buffers()[1])
    return data[column.offset * width : (column.offset + len(column)) * width]


class SeriesStore:
    """``new_key`` and ``add`` while parsing, ``finish`` once, then read series by id."""

    def __init__(self) -> None:
        _sweep_stale(tempfile.gettempdir())
        self._work = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
        self._con: duckdb.DuckDBPyConnection | None = duckdb.connect(
            str(Path(self._work) / "build.duckdb"),
            config={"memory_limit": MEMORY_LIMIT, "temp_directory": self._work,
                    "preserve_insertion_order": "false", "threads": "2"},
        )
        self._con.execute("CREATE TABLE raw (pid BIGINT, ts BIGINT, value DOUBLE, seq BIGINT)")
        self._con.execute("CREATE TABLE keys (pid BIGINT, key VARCHAR)")
        self._fds: list[int] = []
        self._finalizer = weakref.finalize(self, _release, self._fds, self._work)
        self._next_pid = 0
        self._new_buffers()
        self.names: list[str] = []  # metric name by name id
        self.name_ids: array[int] = array("i")  # name id by series id
        self.by_name: dict[str, array[int]] = {}  # metric name -> series ids (int32), in order
        self._key_off = array("q")  # series id -> byte offset of its key (n + 1 entries)
        self._sample_off = array("q")  # series id -> index of its first sample (n + 1 entries)

    def _new_buffers(self) -> None:
        self._pids, self._ts, self._values, self._seqs = (
            array("q"), array("q"), array("d"), array("q"))
        self._keys: list[str] = []
        self._key_pids = array("q")

    def __len__(self) -> int:
        return len(self.name_ids)

    def new_key(self, key: str) -> int:
        """A provisional id for `key` (the parser remembers it while its cache holds the key)."""
        pid = self._next_pid
        self._next_pid += 1
        self._keys.append(key)
        self._key_pids.append(pid)
        return pid

    def add_lines(self, pids: array[int], ts_ms: array[int], values: array[float],
                  seqs: array[int]) -> None:
        """Sample lines, column by column: provisional id (q), timestamp in ms (q), value (d),
        line number (q). The arrays are the store's from then on."""
        self._pids.extend(pids)
        self._ts.extend(ts_ms)
        self._values.extend(values)
        self._seqs.extend(seqs)
        if len(self._pids) >= BATCH_LINES:
            self._flush()

    def _flush(self) -> None:
        con = self._con
        if con is None:
            return
        if self._pids:
            sample_batch = pa.table({  # noqa: F841 (read by the INSERT below)
                "pid": _column(self._pids, pa.int64()), "ts": _column(self._ts, pa.int64()),
                "value": _column(self._values, pa.float64()),
                "seq": _column(self._seqs, pa.int64())})
            con.execute("INSERT INTO raw SELECT * FROM sample_batch")
        if self._keys:
            key_batch = pa.table({  # noqa: F841 (read by the INSERT below)
                "pid": _column(self._key_pids, pa.int64()),
                "key": pa.array(self._keys, pa.string())})
            con.execute("INSERT INTO keys SELECT * FROM key_batch")
        self._new_buffers()

    def finish(self) -> None:
        """Merge the keys, sort the samples and write the flat files; DuckDB is closed."""
        self._flush()
        con = self._con
        assert con is not None, "finish() runs once"
        try:
            con.execute("""
                CREATE TABLE series AS
                SELECT (row_number() OVER (ORDER BY first_pid) - 1)::BIGINT AS sid, key
                FROM (SELECT key, min(pid) AS first_pid FROM keys GROUP BY key)""")
            con.execute("""
                CREATE TABLE pid_sid AS
                SELECT k.pid, s.sid FROM keys k JOIN series s USING (key)""")
            self._write_keys(con)
            self._write_samples(con)
        finally:
            con.close()
            self._con = None
            shutil.rmtree(self._work, ignore_errors=True)  # the open descriptors keep the files

    def _open_scratch(self, name: str) -> int:
        path = Path(self._work) / name
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        self._fds.append(fd)
        path.unlink()
        return fd

    def _write_keys(self, con: duckdb.DuckDBPyConnection) -> None:
        self._keys_fd = fd = self._open_scratch("keys")
        offset = 0
        self._key_off.append(0)
        name_id: dict[str, int] = {}
        reader = con.execute("SELECT key FROM series ORDER BY sid").to_arrow_reader(FETCH_ROWS)
        sid = 0
        for batch in reader:
            chunk = bytearray()
            for key in batch.column(0).to_pylist():
                data = key.encode("utf-8")
                chunk += data
                offset += len(data)
                self._key_off.append(offset)
                brace = key.find("{")
                name = key if brace == -1 else key[:brace]
                nid = name_id.get(name)
                if nid is None:
                    nid = name_id[name] = len(self.names)
                    self.names.append(name)
                    self.by_name[name] = array("i")
                self.name_ids.append(nid)
                self.by_name[name].append(sid)
                sid += 1
            os.write(fd, chunk)

    def _write_samples(self, con: duckdb.DuckDBPyConnection) -> None:
        ts_fd = self._ts_fd = self._open_scratch("ts")
        value_fd = self._value_fd = self._open_scratch("values")
        reader = con.execute("""
            SELECT r.ts, r.value FROM raw r JOIN pid_sid p USING (pid)
            ORDER BY p.sid, r.ts, r.seq""").to_arrow_reader(FETCH_ROWS)
        for batch in reader:
            os.write(ts_fd, _fixed_bytes(batch.column(0), 8))
            os.write(value_fd, _fixed_bytes(batch.column(1), 8))
        ends = con.execute("""
            SELECT (sum(count(*)) OVER (ORDER BY p.sid))::BIGINT AS upto
            FROM raw r JOIN pid_sid p USING (pid) GROUP BY p.sid ORDER BY p.sid""").to_arrow_table()
        self._sample_off.append(0)
        for column in ends.column(0).chunks:
            self._sample_off.frombytes(_fixed_bytes(column, 8))

    # ------------------------------------------------------------------ reads

    def key(self, sid: int) -> str:
        lo, hi = self._key_off[sid], self._key_off[sid + 1]
        return os.pread(self._keys_fd, hi - lo, lo).decode("utf-8")

    def name(self, sid: int) -> str:
        return self.names[self.name_ids[sid]]

    def timestamps(self, sid: int) -> array[int]:
        """The series' timestamps (ms), ascending."""
        lo, hi = self._sample_off[sid], self._sample_off[sid + 1]
        out = array("q")
        out.frombytes(os.pread(self._ts_fd, 8 * (hi - lo), 8 * lo))
        return out

    def window(self, sid: int, lo_ms: int, hi_ms: int) -> tuple[array[int], array[float]]:
        """(timestamps, values) of the series' samples with ``lo_ms <= ts < hi_ms``."""
        ts = self.timestamps(sid)
        i, j = bisect_left(ts, lo_ms), bisect_left(ts, hi_ms)
        values = array("d")
        if j > i:
            first = self._sample_off[sid] + i
            values.frombytes(os.pread(self._value_fd, 8 * (j - i), 8 * first))
        return ts[i:j], values

    def any_in(self, sid: int, lo_ms: int, hi_ms: int) -> bool:
        ts = self.timestamps(sid)
        i = bisect_left(ts, lo_ms)
        return i < len(ts) and ts[i] < hi_ms

    def close(self) -> None:
        """Close the descriptors and remove the scratch folder (also done when collected)."""
        if self._con is not None:
            self._con.close()
            self._con = None
        self._finalizer()
