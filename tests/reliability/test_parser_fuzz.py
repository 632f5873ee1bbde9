"""Property-based fuzz of the OpenMetrics and Workload readers (issue #13, item 9; the sacct
parser's fuzz is tests/connectors/slurm/test_sacct_fuzz.py). Whatever the input, a reader
either loads it, with every unusable part kept as a reject, or refuses the whole file with a
SourceError: never a traceback, never a silently lost line."""

import copy
import json
from datetime import datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.errors import SourceError
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.workload_snapshot import read_workload_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOOD = [
    'kube_pod_info{namespace="ns",pod="p0",uid="u0",node="n1"} 1 1767571200',
    'kube_pod_container_resource_requests{namespace="ns",pod="p0",uid="u0",container="c",'
    'resource="nvidia_com_gpu",unit="integer",node="n1"} 2 1767571200',
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",Hostname="n1"} 37 1767571200',
    'kube_node_status_capacity{node="n1",resource="nvidia_com_gpu",unit="integer"} +Inf '
    "1767571260",
    'kueue_pending_workloads{cluster_queue="cq",status="active"} NaN 1767571260',
]
GARBAGE = st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                         blacklist_characters="\n\r"), max_size=60)
FUZZ = settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _mutate(line: str, data: st.DataObject) -> str:
    how = data.draw(st.sampled_from(["keep", "cut", "insert", "garbage", "drop-ts", "brace"]))
    if how == "keep":
        return line
    if how == "cut":
        return line[: data.draw(st.integers(0, len(line)))]
    if how == "insert":
        at = data.draw(st.integers(0, len(line)))
        return line[:at] + data.draw(GARBAGE) + line[at:]
    if how == "garbage":
        return data.draw(GARBAGE)
    if how == "drop-ts":
        return line.rsplit(" ", 1)[0]
    return line.replace("}", "", 1)


@FUZZ
@given(data=st.data())
def test_an_openmetrics_file_loads_or_is_refused_and_keeps_every_bad_line(tmp_path_factory,
                                                                         data):
    lines = [_mutate(data.draw(st.sampled_from(GOOD)), data)
             for _ in range(data.draw(st.integers(1, 12)))]
    path = tmp_path_factory.mktemp("om") / "m.om"
    path.write_text("# TYPE x gauge\n" + "\n".join(lines) + "\n# EOF\n", encoding="utf-8")
    source = OpenMetricsFileSource(path)
    refused = None
    try:
        # every time a cut timestamp can become (a cut "1767571200" is still a time, in 1970)
        frame = source.raw_samples('{__name__=~".+"}', datetime(1970, 1, 1), datetime(2100, 1, 1))
        rejects = source.rejects
    except SourceError as exc:  # refused whole: the message names the file
        refused = str(exc)
    if refused is not None:
        assert str(path.resolve()) in refused or str(path) in refused
        return
    # a line is a sample or a reject: none vanishes (a line written twice is one sample, as
    # the store keeps one sample per series and timestamp)
    sample_lines = {ln for ln in lines if ln.strip() and not ln.startswith("#")}
    assert frame.height + len(rejects) >= len(sample_lines)
    for r in rejects:
        assert r.source_file == str(path.resolve())
        assert r.line_no >= 2
        assert r.reason.startswith("expected")


def _items() -> list[dict]:
    items = []
    for f in sorted(FIXTURES.glob("kueue/*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        items += [i for i in doc.get("items", []) if isinstance(i, dict)]
    return items


ITEMS = _items()
VALUES = st.one_of(st.none(), st.integers(-5, 10**12), st.text(max_size=8), st.booleans(),
                   st.just([]), st.just({}), st.floats(allow_nan=True))


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _set(node: object, path: tuple, value: object) -> None:
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


@FUZZ
@given(data=st.data())
def test_a_workload_snapshot_loads_item_by_item_whatever_a_field_holds(tmp_path_factory, data):
    items = []
    for _ in range(data.draw(st.integers(1, 4))):
        item = copy.deepcopy(data.draw(st.sampled_from(ITEMS)))
        for _ in range(data.draw(st.integers(0, 3))):
            paths = _paths(item)
            if paths:
                _set(item, data.draw(st.sampled_from(paths)), data.draw(VALUES))
        items.append(item)
    path = tmp_path_factory.mktemp("wl") / "workloads.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items},
                               default=str), encoding="utf-8")
    try:
        snap = read_workload_snapshot(path)
    except SourceError:
        return  # refused whole with a reason (e.g. NaN is not JSON kubectl writes)
    # every item is a row or a reject (the same uid twice keeps one row and says so)
    assert snap.raw.height + len(snap.rejects) >= len(items) - snap.raw["uid"].is_duplicated().sum()
    assert snap.workloads.height == snap.raw.height
    for r in snap.rejects:
        assert 0 <= r.line_no < len(items)
        assert "expected" in r.reason
