"""A bad sample line of an OpenMetrics file is a reject; the rest of the file loads.

* each kind of malformed sample line (label set, value, timestamp, metric name, trailing text,
  undecodable bytes) is kept in ``source.rejects`` with file, line, field, "expected ..., found
  ..." and the raw line, and every other line loads as before;
* ``NaN``, ``+Inf`` and ``-Inf`` are values, kept as such;
* a file that is not OpenMetrics at all (missing, corrupt gzip, garbage, no sample line, more bad
  sample lines than good ones) still raises ``SourceError``;
* property-style: random files with random corruptions reject exactly the corrupted lines and
  load exactly the others.
"""

from __future__ import annotations

import gzip
import math
import random
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from connectors.errors import Reject, SourceError, rejects_frame
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource

T0 = 1736150400  # 2025-01-06T08:00:00Z
WINDOW = (datetime(2025, 1, 6), datetime(2025, 1, 8))
EVERYTHING = '{__name__=~".+"}'
SMALL_CLUSTER = Path(__file__).resolve().parents[2] / "fixtures/openmetrics/small-cluster.om.gz"


def write(path: Path, lines: list[bytes | str], *, gz: bool = False) -> Path:
    data = b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def good(i: int) -> str:
    return f'm{{pod="p{i}"}} {i} {T0 + i}'


# (line as written, field, reason)
BAD_LINES: list[tuple[bytes | str, str, str]] = [
    ('m{pod="x" 1 1736150400', "labels",
     "expected a label set closed by '}', found '{pod=\"x\" 1 1736150400'"),
    ('m{pod=x} 1 1736150400', "labels", "expected label=\"value\" pairs, found 'pod=x'"),
    ('m{pod="x",pod="y"} 1 1736150400', "labels", "expected each label once, found 'pod' twice"),
    ('m{pod="x"} one 1736150400', "value",
     "expected a number, NaN, +Inf or -Inf as the value, found 'one'"),
    ('m{pod="x"} 1_000 1736150400', "value",
     "expected a number, NaN, +Inf or -Inf as the value, found '1_000'"),
    ('m{pod="x"} 1 yesterday', "timestamp", "expected a timestamp in seconds, found 'yesterday'"),
    ('m{pod="x"} 1 +Inf', "timestamp", "expected a timestamp in seconds, found '+Inf'"),
    ('m{pod="x"} 1 1736150400000', "timestamp",
     "expected a timestamp in seconds, found '1736150400000' (milliseconds?)"),
    ('m{pod="x"} 1', "timestamp",
     "expected a timestamp (seconds) after the value '1', found nothing"),
    ('m{pod="x"}', "value", "expected a value after 'm{pod=\"x\"}', found nothing"),
    ("9m 1 1736150400", "name",
     "expected a metric name like [a-zA-Z_:][a-zA-Z0-9_:]*, found '9m'"),
    ('kube-pod{pod="x"} 1 1736150400', "name",
     "expected a metric name like [a-zA-Z_:][a-zA-Z0-9_:]*, found 'kube-pod'"),
    ('m{pod="x"} 1 1736150400 7', "line",
     "expected the end of the line after the timestamp, found '7'"),
    (b'm{pod="\xff\xfe"} 1 1736150400', "line",
     "expected UTF-8 text, found undecodable bytes at character 7"),
]


@pytest.fixture(params=[False, True], ids=["plain", "gzip"])
def mixed(request, tmp_path: Path) -> tuple[Path, list[int]]:
    """Good lines 1, 3, 5, ... and one bad line of each kind between them."""
    lines: list[bytes | str] = ["# HELP m a gauge", "# TYPE m gauge"]
    bad_at = []
    for i, (bad, _field, _reason) in enumerate(BAD_LINES):
        lines.append(good(i))
        lines.append(bad)
        bad_at.append(len(lines))
    lines += [good(100 + i) for i in range(len(BAD_LINES))]  # good lines outnumber bad ones
    lines.append("# EOF")
    lines.append("after EOF, never read")
    name = "mixed.om.gz" if request.param else "mixed.om"
    return write(tmp_path / name, lines, gz=request.param), bad_at


def test_each_bad_line_is_a_reject_and_the_rest_loads(mixed):
    path, bad_at = mixed
    src = OpenMetricsFileSource(path)
    frame = src.raw_samples("m", *WINDOW)
    loaded = sorted(frame["pod"].to_list(), key=lambda p: int(p[1:]))
    assert loaded == [f"p{i}" for i in range(len(BAD_LINES))] + [
        f"p{100 + i}" for i in range(len(BAD_LINES))]
    expected = [
        Reject("openmetrics", str(path.resolve()), line_no, field, reason,
               raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
        for line_no, (raw, field, reason) in zip(bad_at, BAD_LINES, strict=True)
    ]
    assert src.rejects == expected


def test_rejects_are_read_without_a_query_and_are_storable(tmp_path: Path):
    path = write(tmp_path / "m.om", [good(1), b'm{pod="\xff"} 1 1736150400', good(2), "# EOF"])
    src = OpenMetricsFileSource(path)
    (reject,) = src.rejects  # parses the file on first access
    assert (reject.line_no, reject.field, reject.raw) == (2, "line", 'm{pod="\ufffd"} 1 1736150400')
    frame = rejects_frame(src.rejects)
    assert frame.select("source", "line_no").rows() == [("openmetrics", 2)]
    assert src.raw_samples("m", *WINDOW).height == 2
    assert src.rejects is src.rejects  # complete once parsed: the same list


def test_a_huge_bad_line_is_kept_cut(tmp_path: Path):
    huge = 'm{pod="' + "x" * 10_000 + " 1 1736150400"
    src = OpenMetricsFileSource(write(tmp_path / "m.om", [good(1), huge, good(2)]))
    (reject,) = src.rejects
    assert reject.raw == huge[:4096]
    assert len(reject.reason) < 200


def test_nan_and_infinities_are_values(tmp_path: Path):
    values = ["NaN", "+Inf", "-Inf", "Inf", "nan", "-0.5", "1e3", "2.5E-3"]
    path = write(tmp_path / "m.om", [
        f'm{{pod="p{i}"}} {v} {T0 + i}.25' for i, v in enumerate(values)])
    src = OpenMetricsFileSource(path)
    frame = src.raw_samples("m", *WINDOW).sort("pod")
    got = frame["value"].to_list()
    assert math.isnan(got[0])
    assert math.isnan(got[4])
    assert got[1:4] == [math.inf, -math.inf, math.inf]
    assert got[5:] == [-0.5, 1000.0, 0.0025]
    assert frame["value"].null_count() == 0
    assert frame["ts"].to_list() == [
        datetime(2025, 1, 6, 8) + timedelta(seconds=i, milliseconds=250)
        for i in range(len(values))]
    assert src.rejects == []


_GZIP = gzip.compress("".join(f"{good(i)}\n" for i in range(2000)).encode())
TRUNCATED_GZIP = _GZIP[: len(_GZIP) // 2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "expected an OpenMetrics file at"),
        (b"\x1f\x8b" + b"\x00" * 40, "expected a readable OpenMetrics file"),
        (TRUNCATED_GZIP, "expected a readable OpenMetrics"),
        (random.Random(7).randbytes(20_000), "found 0 readable"),
        (b"# HELP m nothing\n# TYPE m gauge\n\n# EOF\n", "found 0 readable and 0 unreadable"),
        (f"{good(1)}\nm 1\nm 2\n# EOF\n".encode(), "found 1 readable and 2 unreadable"),
        (b"job,pod,gpus\nj1,p1,2\nj2,p2,4\n", "found 0 readable and 3 unreadable"),
    ],
    ids=["missing", "bad-gzip", "truncated-gzip", "binary", "no-sample", "mostly-bad", "csv"],
)
def test_a_file_that_is_not_openmetrics_raises(tmp_path: Path, content, message):
    path = tmp_path / "not.om"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SourceError, match=message):
        OpenMetricsFileSource(path).raw_samples("m", *WINDOW)


def test_mostly_bad_names_the_first_bad_line(tmp_path: Path):
    path = write(tmp_path / "m.om", [good(1), "m 1", "m 2"])
    with pytest.raises(SourceError, match=r"first: .*m\.om:2: field timestamp: expected"):
        OpenMetricsFileSource(path).rejects  # noqa: B018 (the property parses)


def test_the_committed_fixture_has_no_rejects():
    src = OpenMetricsFileSource(SMALL_CLUSTER)
    assert src.rejects == []
    assert src.raw_samples(EVERYTHING, *WINDOW).height == 26_290


# --------------------------------------------------------------------------- property-style

LABEL_VALUES = ["a", "team-llm", 'quo"te', "back\\slash", "new\nline", "é日本", "", "}{"]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value_text(rng: random.Random) -> tuple[str, float]:
    choice = rng.randrange(6)
    if choice == 0:
        return rng.choice([("NaN", math.nan), ("+Inf", math.inf), ("-Inf", -math.inf)])
    if choice == 1:
        v = rng.randint(-5, 5) * 10 ** rng.randint(-3, 3)
        return f"{v:e}", float(f"{v:e}")
    v = round(rng.uniform(-100, 100), rng.randint(0, 4))
    return repr(v), v


def _corrupt(rng: random.Random, line: str, has_labels: bool) -> bytes:
    kind = rng.randrange(7)
    head, value, ts = line.rsplit(" ", 2)
    if kind == 0:
        return f"{head} {value}".encode()  # no timestamp
    if kind == 1:
        return f"{head} {rng.choice(['abc', '1.2.3', '--1', '0x'])} {ts}".encode()
    if kind == 2:
        return f"{head} {value} {rng.choice(['now', '12:00', 'NaN', '-Inf'])}".encode()
    if kind == 3:  # an unterminated (or opened) label set
        return (f"{head[:-1]} {value} {ts}" if has_labels else f"{head}{{ {value} {ts}").encode()
    if kind == 4:
        return f"{rng.choice(['0', '-', '.'])}{line}".encode()  # bad metric name
    if kind == 5:
        return f"{line} {rng.choice(['1', 'x', '# c'])}".encode()  # trailing text
    raw = line.encode()
    cut = rng.randrange(1, len(raw))
    return raw[:cut] + b"\xc3\x28" + raw[cut:]  # an invalid UTF-8 sequence


@pytest.mark.parametrize("seed", range(40))
def test_random_corruptions_reject_exactly_the_corrupted_lines(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    lines: list[bytes] = [b"# TYPE g gauge"]
    want: set[tuple] = set()
    bad_at: list[int] = []
    n = rng.randint(5, 40)
    corrupted = set(rng.sample(range(n), rng.randint(1, n // 2)))  # never more bad than good
    for i in range(n):
        name = rng.choice(["g", "kube_pod_info", "DCGM_FI_DEV_GPU_UTIL", "ns:rule:rate5m"])
        labels = {f"l{j}": rng.choice(LABEL_VALUES) for j in range(rng.randint(0, 3))}
        body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        head = f"{name}{{{body}}}" if labels or rng.random() < 0.3 else name
        value_text, value = _value_text(rng)
        ts = T0 + i * 15 + rng.choice([0, 0.5, 0.001])
        line = f"{head} {value_text} {ts}"
        if i in corrupted:
            lines.append(_corrupt(rng, line, "{" in head))
            bad_at.append(len(lines))
        else:
            lines.append(line.encode())
            kept = tuple(sorted((k, v) for k, v in labels.items() if v != ""))
            want.add((name, kept, round(ts * 1000), "nan" if math.isnan(value) else value))
        if rng.random() < 0.2:
            lines.append(rng.choice([b"", b"# HELP g x", b"# just a comment"]))
    lines.append(b"# EOF")
    path = write(tmp_path / "random.om", lines)  # type: ignore[arg-type]
    src = OpenMetricsFileSource(path)
    frame = src.raw_samples(EVERYTHING, *WINDOW)
    label_cols = [c for c in frame.columns if c not in ("ts", "value", "__name__")]
    got = set()
    for row in frame.iter_rows(named=True):
        kept = tuple(sorted((k, row[k]) for k in label_cols if row[k] is not None))
        ts_ms = (row["ts"] - datetime(1970, 1, 1)) // timedelta(milliseconds=1)
        value = "nan" if math.isnan(row["value"]) else row["value"]
        got.add((row["__name__"], kept, ts_ms, value))
    assert frame.height == len(want)
    assert got == want
    assert [r.line_no for r in src.rejects] == bad_at
    assert all(r.reason.startswith("expected ") and ", found " in r.reason for r in src.rejects)
    assert rejects_frame(src.rejects).height == len(bad_at)
