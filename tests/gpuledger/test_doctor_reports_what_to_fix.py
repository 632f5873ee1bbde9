"""``gpuledger doctor`` without live services: the sample site passes, and each broken part of a
site file gives its own FAIL line with "expected …, found …; fix: …" and exit code 1.

The checks against the suite's real Slurm and Prometheus are in
``tests/slurm_real/test_doctor_real_sources.py``.
"""

import re
import socket
from pathlib import Path

from tests.gpuledger.doctor_sites import SAMPLE, doctor, line, skewed_prefix, write_site

SAMPLE_SITE = SAMPLE / "gpuledger.toml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _is_fail_with_fix(text: str) -> bool:
    return text.startswith("FAIL ") and "expected " in text and "; fix: " in text


def test_sample_site_passes_with_a_sample_of_jobs_and_workloads(capsys):
    code, lines = doctor(SAMPLE_SITE, capsys)
    assert code == 0, "\n".join(lines)
    assert not [ln for ln in lines if ln.startswith("FAIL")]
    assert line(lines, "site file").startswith("OK")
    for key in ("nodes", "accounts", "identity_map", "rate_card"):
        assert line(lines, f"reference {key}").startswith("OK")
    dump = line(lines, "slurm gpulab: sacct dump")
    assert dump.startswith("OK")
    assert "0 rejected" in dump
    jobs = [ln.strip() for ln in lines if ln.strip().startswith("job ")]
    assert len(jobs) == 5
    assert all("GPU(s)" in j for j in jobs)
    for metric in ("kube_pod_container_resource_requests", "kube_pod_status_phase",
                   "kube_pod_info", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
        assert line(lines, f"prometheus gpulab: {metric}").startswith("OK")
    assert [ln for ln in lines if ln.strip().startswith("workload ")]
    assert lines[-1].endswith(" 0 FAIL")


def test_invalid_site_file_names_the_key(tmp_path: Path, capsys):
    site = tmp_path / "site.toml"
    site.write_text(SAMPLE_SITE.read_text().replace('[gpuledger.schedules]',
                                                     '[gpuledger.schedules]\ndialy = "0 1 * * *"'))
    code, lines = doctor(site, capsys)
    assert code == 1
    first = line(lines, "site file")
    assert first.startswith("FAIL")
    assert "'dialy'" in first
    assert "gpuledger.schedules" in first
    assert "fix:" in first


def test_no_site_file_at_all(tmp_path: Path, capsys):
    code, lines = doctor(tmp_path / "missing.toml", capsys)
    assert code == 1
    assert line(lines, "site file").startswith("FAIL")


def test_missing_reference_file_and_unwritable_ledger_folder(tmp_path: Path, capsys):
    (tmp_path / "not-a-folder").write_text("a file where the ledger folder should be")
    site = write_site(tmp_path, {"a": {"kueue": {"snapshot": str(SAMPLE / "kueue" /
                                                                  "workloads.json")}}},
                      reference={"rate_card": str(tmp_path / "rates.csv")},
                      db=str(tmp_path / "not-a-folder" / "ledger.duckdb"))
    code, lines = doctor(site, capsys)
    assert code == 1
    rates = line(lines, "reference rate_card")
    assert _is_fail_with_fix(rates)
    assert str(tmp_path / "rates.csv") in rates
    assert "[gpuledger.reference].rate_card" in rates
    ledger = line(lines, "ledger folder")
    assert _is_fail_with_fix(ledger)
    assert "[gpuledger].db" in ledger
    assert line(lines, "reference nodes").startswith("OK")  # one bad file spoils no other
    assert line(lines, "kueue a: snapshot").startswith("OK")


def test_prefix_that_cannot_run_stops_the_slurm_checks(tmp_path: Path, capsys):
    site = write_site(tmp_path, {"a": {"slurm": {"prefix": f"{tmp_path}/no-such-ssh login"}}})
    code, lines = doctor(site, capsys)
    assert code == 1
    prefix = line(lines, "slurm a: prefix")
    assert _is_fail_with_fix(prefix)
    assert "no-such-ssh" in prefix
    assert ".slurm].prefix" in prefix
    assert not [ln for ln in lines if "slurm a: sacct" in ln]  # nothing else through it


def test_clock_skew_of_the_slurm_host_beyond_the_sanity_limit(tmp_path: Path, capsys):
    prefix = skewed_prefix(tmp_path, 3600)
    site = write_site(tmp_path, {"a": {"slurm": {"prefix": str(prefix), "sreport": False,
                                                 "timeout_s": 5}}})
    code, lines = doctor(site, capsys)
    assert code == 1
    assert line(lines, "slurm a: prefix").startswith("OK")
    clock = line(lines, "slurm a: clock")
    assert _is_fail_with_fix(clock)
    assert "within 300 s" in clock
    ahead = re.search(r"the Slurm host is (\d+) s ahead of here", clock)
    assert ahead, clock
    assert 3590 <= int(ahead.group(1)) <= 3610, clock  # date +%s has whole seconds


def test_prometheus_url_nobody_answers(tmp_path: Path, capsys):
    url = f"http://127.0.0.1:{_free_port()}"
    site = write_site(tmp_path, {"a": {"prometheus": {"url": url, "connect_timeout_s": 2,
                                                      "retries": 0}}})
    code, lines = doctor(site, capsys)
    assert code == 1
    reach = line(lines, "prometheus a: reachable")
    assert _is_fail_with_fix(reach)
    assert url in reach
    assert ".prometheus].url" in reach


def test_kubeconfig_without_the_configured_context(tmp_path: Path, capsys):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: ops\n"
        "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n"
        "users:\n- name: u\n  user:\n    token: t\n"
        "contexts:\n- name: ops\n  context:\n    cluster: c\n    user: u\n")
    site = write_site(tmp_path, {"a": {"kueue": {"kubeconfig": str(kubeconfig),
                                                 "context": "prod"}}})
    code, lines = doctor(site, capsys)
    assert code == 1
    kube = line(lines, "kueue a: kubeconfig")
    assert _is_fail_with_fix(kube)
    assert "'prod'" in kube
    assert "ops" in kube


def test_bearer_token_file_that_is_not_there(tmp_path: Path, capsys):
    site = write_site(tmp_path, {"a": {"prometheus": {
        "url": f"http://127.0.0.1:{_free_port()}", "bearer_token_file": "token"}}})
    code, lines = doctor(site, capsys)
    assert code == 1
    auth = line(lines, "prometheus a: auth")
    assert _is_fail_with_fix(auth)
    assert str(tmp_path / "token") in auth
    assert ".prometheus].bearer_token_file" in auth
