"""``node_gpu_slices`` is effective-dated like ``node_inventory`` (gpuledger/ingest/reference.py):
a MIG layout changed mid-day closes the node's rows and opens the new ones; a re-read with
nothing changed writes nothing; scontrol's rows are not touched.

Series: tests/fixtures/kubernetes/sharing/ksm-mig-mixed-h100.prom (kubectl-view-allocations#258's
all-balanced H100), then the MIG manager's all-1g.12gb layout (mig.config relabelled, 7 x 1g).
"""

from datetime import timedelta

from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.reference import write_cluster_reference
from gpuledger.ingest.reference_read import ClusterReference, read_k8s_reference
from models.runner import connect
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import series
from tests.connectors.kubernetes.sharing_shapes import MIG_MIXED, node_lines

CHANGE = 1800  # seconds after T0: the layout changes
BALANCED = node_lines(MIG_MIXED)
_GONE = ("nvidia_com_mig_2g_24gb", "nvidia_com_mig_3g_47gb")
ALL_1G = [
    ln.but(label_nvidia_com_mig_config="all-1g.12gb", label_nvidia_com_mig_1g_12gb_count="7",
           label_nvidia_com_mig_2g_24gb_count=None, label_nvidia_com_mig_3g_47gb_count=None)
    if ln.name == "kube_node_labels"
    else ln.but(value=7.0) if ln.get("resource") == "nvidia_com_mig_1g_12gb" else ln
    for ln in BALANCED if ln.get("resource") not in _GONE
]


def _read(src, at):
    ref = ClusterReference(cluster="k8s", observed_at=at)
    read_k8s_reference(ref, src, namespace_labels={}, lookback=timedelta(minutes=10))
    return ref


def _rows(con):
    return con.execute(
        "SELECT slice_profile, units, mig_config, valid_from, valid_to FROM node_gpu_slices "
        "ORDER BY valid_from, slice_profile").fetchall()


def test_a_mig_layout_change_closes_the_rows_and_opens_the_new_ones(tmp_path):
    times = list(range(0, 3600, 30))
    src = OpenMetricsFileSource(om_file(tmp_path / "ksm.om", series(
        lambda t: BALANCED if t < CHANGE else ALL_1G, times)))
    t1, t2 = T0 + timedelta(seconds=1200), T0 + timedelta(seconds=3000)
    with connect(tmp_path / "l.duckdb") as con:
        con.execute("INSERT INTO node_gpu_slices (cluster, node, sharing, slice_profile, units, "
                    "source, valid_from) VALUES ('k8s', 'gpu-mig-1', 'mig', '1g.12gb', 2, "
                    "'scontrol', ?)", [T0])
        lines = write_cluster_reference(con, _read(src, t1), None, frozenset({"nodes"}))
        assert any("node_gpu_slices: 3 opened, 0 closed" in x for x in lines), lines
        again = write_cluster_reference(con, _read(src, t1 + timedelta(seconds=60)), None,
                                        frozenset({"nodes"}))
        assert any("node_gpu_slices: 0 opened, 0 closed" in x for x in again), again
        changed = write_cluster_reference(con, _read(src, t2), None, frozenset({"nodes"}))
        assert any("node_gpu_slices: 1 opened, 3 closed" in x for x in changed), changed
        ksm = con.execute(
            "SELECT slice_profile, units, mig_config, valid_from, valid_to FROM node_gpu_slices "
            "WHERE source = 'ksm' ORDER BY valid_from, slice_profile").fetchall()
        scontrol = con.execute("SELECT valid_to FROM node_gpu_slices WHERE source = "
                               "'scontrol'").fetchall()
    assert ksm == [
        ("1g.12gb", 2, "all-balanced", t1, t2),
        ("2g.24gb", 1, "all-balanced", t1, t2),
        ("3g.47gb", 1, "all-balanced", t1, t2),
        ("1g.12gb", 7, "all-1g.12gb", t2, None),
    ]
    assert scontrol == [(None,)]
