"""``gpuledger doctor`` against the suite's REAL Slurm (``real_slurm``) and a REAL Prometheus
scraping upstream exporters' exposition text (the scrape harness, ``prometheus_scrape``): a site
file that points at them passes with every check OK and a sample of the real jobs and pods;
each broken variant (wrong prefix, wrong URL, a missing metric, a bad selector, a missing
reference file, a skewed Slurm clock) gives its FAIL line with a fix and exit code 1.

Expositions (tests/fixtures/expositions/README.md says where each comes from): kube-state-metrics
``pod_test.go`` and ``node_test.go`` @ v2.20.0, dcgm-exporter PR #655's ``expectedResponse``,
Kueue v0.17.0's metric definitions. This module lives beside ``real_slurm``'s conftest so it
shares the one Slurm of the session.
"""

import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gpuledger.doctor_sites import SAMPLE, doctor, line, skewed_prefix, write_site
from tests.prometheus_real.conftest import prometheus_scrape, prometheus_tools  # noqa: F401
from tests.prometheus_real.scrape import (
    EXPOSITIONS,
    ScrapeHarness,
    dcgm_exporter,
    kube_state_metrics,
    kueue_controller,
)

pytestmark = [pytest.mark.slurm, pytest.mark.prometheus]

KSM = ((EXPOSITIONS / "kube-state-metrics-v2.20.0-pod_test.prom").read_text()
       + (EXPOSITIONS / "kube-state-metrics-v2.20.0-node_test.prom").read_text())
DCGM = (EXPOSITIONS / "dcgm-exporter-pr-655-hostname.prom").read_text()
KUEUE = (EXPOSITIONS / "kueue-v0.17.0-leader.prom").read_text()
SETUP = "nohonor"  # the ServiceMonitor default


@pytest.fixture(scope="module")
def prometheus(prometheus_scrape) -> Iterator[ScrapeHarness]:  # noqa: F811
    targets = [kube_state_metrics(KSM), dcgm_exporter(DCGM), kueue_controller(KUEUE)]
    with prometheus_scrape(targets, interval_s=1.0, setups={SETUP: {}}) as harness:
        harness.wait_for_samples(3)
        yield harness


@pytest.fixture(scope="module")
def without_dcgm(prometheus_scrape) -> Iterator[ScrapeHarness]:  # noqa: F811
    targets = [kube_state_metrics(KSM), kueue_controller(KUEUE)]
    with prometheus_scrape(targets, interval_s=1.0, setups={SETUP: {}}) as harness:
        harness.wait_for_samples(3)
        yield harness


def _clusters(real_slurm, url: str, **changes: dict) -> dict:
    tables = {
        "slurm": {"prefix": "", "timeout_s": 60},
        "prometheus": {"url": url, "retries": 0, "connect_timeout_s": 5},
        "kueue": {"snapshot": str(SAMPLE / "kueue" / "workloads.json")},
    }
    for table, keys in changes.items():
        tables[table] = {**tables[table], **keys}
    return {real_slurm.cluster: tables}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fails(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.startswith("FAIL")]


def _fix(text: str) -> None:
    assert text.startswith("FAIL "), text
    assert "expected " in text, text
    assert "; fix: " in text, text


def test_site_on_the_real_sources_is_all_ok_with_real_jobs_and_pods(
        tmp_path: Path, capsys, real_slurm, prometheus: ScrapeHarness):
    site = write_site(tmp_path, _clusters(real_slurm, prometheus.url(SETUP)))
    code, lines = doctor(site, capsys)
    text = "\n".join(lines)
    assert code == 0, text
    assert not _fails(lines), text
    name = real_slurm.cluster
    for what in ("prefix", "clock", "sacct --version", "sacct last hour", "jobs", "sreport"):
        assert line(lines, f"slurm {name}: {what}").startswith("OK "), text
    assert "slurm-wlm 22.05" in line(lines, f"slurm {name}: sacct --version")
    for what in ("reachable", "auth", "clock", "selector", "kube_pod_container_resource_requests",
                 "kube_pod_status_phase", "kube_pod_info", "kube_node_status_capacity",
                 "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "kueue_*", "GPU pods"):
        assert line(lines, f"prometheus {name}: {what}").startswith("OK "), text
    # dcgm-exporter without the profiling field: the fallback is read and said so
    dcgm = line(lines, f"prometheus {name}: DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert "DCGM_FI_DEV_GPU_UTIL" in dcgm
    # the sample: the job set's own jobs with their GPUs, and the KSM fixture's GPU pod
    jobs = [ln.split()[1] for ln in lines if ln.strip().startswith("job ")]
    assert len(jobs) == 5, text
    assert {re.split(r"[_+]", j)[0] for j in jobs} & set(real_slurm.manifest.values()), text
    assert all("GPU(s)" in ln for ln in lines if ln.strip().startswith("job ")), text
    assert any(ln.strip().startswith("pod ns1/pod1 container pod1_con1") and "1 GPU(s)" in ln
               for ln in lines), text


def test_wrong_prefix(tmp_path: Path, capsys, real_slurm, prometheus: ScrapeHarness):
    # ssh to a port where no sshd listens (loopback: no name lookup, no traffic off the host)
    prefix = f"ssh -o BatchMode=yes -o ConnectTimeout=3 -p {_free_port()} slurm@127.0.0.1"
    if shutil.which("ssh") is None:  # then the prefix cannot even start: the same FAIL
        prefix = f"{tmp_path}/ssh"
    broken = _clusters(real_slurm, prometheus.url(SETUP), slurm={"prefix": prefix})
    code, lines = doctor(write_site(tmp_path, broken), capsys)
    assert code == 1
    _fix(line(lines, f"slurm {real_slurm.cluster}: prefix"))
    assert [f for f in _fails(lines) if ": prefix" in f] == _fails(lines)


def test_wrong_prometheus_url(tmp_path: Path, capsys, real_slurm, prometheus: ScrapeHarness):
    wrong = prometheus.url(SETUP) + "/api/v1"  # the API path, not the server's root
    code, lines = doctor(write_site(tmp_path, _clusters(real_slurm, wrong)), capsys)
    assert code == 1
    reach = line(lines, f"prometheus {real_slurm.cluster}: reachable")
    _fix(reach)
    assert "HTTP 404" in reach
    assert "without /api/v1" in reach


def test_missing_metric(tmp_path: Path, capsys, real_slurm, without_dcgm: ScrapeHarness):
    code, lines = doctor(write_site(tmp_path, _clusters(real_slurm, without_dcgm.url(SETUP))),
                         capsys)
    assert code == 1
    name = real_slurm.cluster
    dcgm = line(lines, f"prometheus {name}: DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    _fix(dcgm)
    assert "DCGM_FI_DEV_GPU_UTIL" in dcgm
    assert "dcgm-exporter" in dcgm
    assert [f for f in _fails(lines) if "DCGM" in f] == _fails(lines)
    assert line(lines, f"prometheus {name}: kube_pod_info").startswith("OK ")


def test_selector_that_matches_nothing(tmp_path: Path, capsys, real_slurm,
                                       prometheus: ScrapeHarness):
    clusters = _clusters(real_slurm, prometheus.url(SETUP),
                         prometheus={"selector": 'cluster="nope"'})
    code, lines = doctor(write_site(tmp_path, clusters), capsys)
    assert code == 1
    selector = line(lines, f"prometheus {real_slurm.cluster}: selector")
    _fix(selector)
    assert 'cluster="nope"' in selector
    assert ".prometheus].selector" in selector


def test_missing_reference_file(tmp_path: Path, capsys, real_slurm, prometheus: ScrapeHarness):
    site = write_site(tmp_path, _clusters(real_slurm, prometheus.url(SETUP)),
                      reference={"identity_map": "identity.csv"})
    code, lines = doctor(site, capsys)
    assert code == 1
    ident = line(lines, "reference identity_map")
    _fix(ident)
    assert str(tmp_path / "identity.csv") in ident
    assert _fails(lines) == [ident]


def test_skewed_slurm_clock(tmp_path: Path, capsys, real_slurm, prometheus: ScrapeHarness):
    clusters = _clusters(real_slurm, prometheus.url(SETUP),
                         slurm={"prefix": str(skewed_prefix(tmp_path, 900))})
    code, lines = doctor(write_site(tmp_path, clusters), capsys)
    assert code == 1
    name = real_slurm.cluster
    _fix(line(lines, f"slurm {name}: clock"))
    # the rest goes through the same prefix to the real Slurm, and still works
    assert line(lines, f"slurm {name}: sacct last hour").startswith("OK ")
    assert _fails(lines) == [line(lines, f"slurm {name}: clock")]
