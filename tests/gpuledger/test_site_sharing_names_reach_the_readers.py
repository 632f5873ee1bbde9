"""``[gpuledger.sharing]`` (docs/site-file.md): replica resource names in kube-state-metrics'
spelling, validated with "expected …, found …", and carried to the Kubernetes readers through
``Settings.sharing`` (the path ``gpu_resources`` takes)."""

from pathlib import Path

import pytest

from connectors.gpu_sharing import SharingNames
from gpuledger.site import SiteError, load_site
from gpuledger.site.config import load_settings

BASE = """\
[gpuledger]
first_day = "2026-01-05"

[gpuledger.clusters.a.prometheus]
url = "https://prometheus.example.org"
"""


def _site(tmp_path: Path, sharing: str) -> Path:
    path = tmp_path / "gpuledger.toml"
    path.write_text(BASE + sharing, encoding="utf-8")
    return path


def test_without_the_table_the_defaults_hold(tmp_path):
    assert load_site(_site(tmp_path, "")).sharing == SharingNames()


def test_the_names_reach_the_settings(tmp_path):
    path = _site(tmp_path, '[gpuledger.sharing]\ntime_slicing_resources = ["nvidia_com_gpu_ts"]\n'
                           'mps_resources = ["nvidia_com_gpu_mps"]\n')
    settings = load_settings(path)
    assert settings.sharing == SharingNames(("nvidia_com_gpu_ts",), ("nvidia_com_gpu_mps",))
    assert settings.site is not None
    assert settings.site.sharing == settings.sharing


@pytest.mark.parametrize(("body", "message"), [
    ('time_slicing_resources = ["nvidia.com/gpu.shared"]',
     "[gpuledger.sharing.time_slicing_resources]: expected names as kube-state-metrics writes "
     "them"),
    ('mps_resources = ["nvidia_com_mig_1g_10gb"]',
     "[gpuledger.sharing.mps_resources]: expected a replica resource, not nvidia_com_gpu"),
    ('time_slicing_resources = "nvidia_com_gpu_shared"',
     "[gpuledger.sharing.time_slicing_resources]: expected a list of kube-state-metrics "
     "resource names"),
    ('mps_resources = ["nvidia_com_gpu_shared"]',
     "[gpuledger.sharing.mps_resources]: expected names not also in time_slicing_resources, "
     "found ['nvidia_com_gpu_shared']"),
    ('replicas = 4', "[gpuledger.sharing]: expected only the keys"),
])
def test_bad_names_name_the_file_and_key(tmp_path, body, message):
    path = _site(tmp_path, f"[gpuledger.sharing]\n{body}\n")
    with pytest.raises(SiteError) as err:
        load_site(path)
    assert str(err.value).startswith(f"{path}: {message}")


def test_ingest_kubernetes_reads_the_resources_the_site_names(tmp_path):
    """`gpuledger ingest kubernetes --openmetrics` with the site's [gpuledger.sharing]: a pod's
    request of a site-named resource is a time-slicing row; without the name it is not read."""
    import duckdb

    from gpuledger.cli import main
    from tests.connectors.kubernetes.fakes import om_file
    from tests.connectors.kubernetes.ksm_expositions import series
    from tests.connectors.kubernetes.sharing_shapes import (
        SCRAPES,
        TIME_SLICING,
        node_lines,
        pod_life,
        pod_lines,
    )
    renamed = [ln.but(resource="nvidia_com_gpu_ts") for ln in pod_lines(TIME_SLICING)]
    nodes = node_lines(TIME_SLICING)
    om = om_file(tmp_path / "ksm.om", series(pod_life(lambda _t: nodes, renamed), SCRAPES))
    rows = {}
    for name, sharing in (("named", '[gpuledger.sharing]\ntime_slicing_resources = '
                                    '["nvidia_com_gpu_ts"]\n'), ("unnamed", "")):
        folder = tmp_path / name
        folder.mkdir()
        path = _site(folder, sharing)
        db = folder / "l.duckdb"
        assert main(["--config", str(path), "--db", str(db), "ingest", "kubernetes",
                     "--openmetrics", str(om), "--start", "2025-01-06", "--end", "2025-01-07",
                     "--cluster", "a"]) == 0
        with duckdb.connect(str(db), read_only=True) as con:
            rows[name] = con.execute("SELECT gpu_resource, sharing, gpus FROM "
                                     "k8s_pod_allocations").fetchall()
    assert rows == {"named": [("nvidia_com_gpu_ts", "time_slicing", 2)], "unnamed": []}
