"""A symlink in a snapshot folder is not followed (issue #28, the probe: a link to a private file
put its first line into rejects.raw, readable by every SQL reader). Kubernetes snapshot folders
(Workloads, ResourceClaims: kube_api.snapshot_files) and scontrol snapshot folders
(scontrol_ingest.snapshot_folder_files, which Dagster's resource uses too) list regular files
only, and say what they skipped."""

import logging
from pathlib import Path

import duckdb

from connectors.kubernetes.kube_api import snapshot_files
from gpuledger.ingest.site_load import _workloads
from gpuledger.ingest.slurm.scontrol import snapshot_folder_files
from models.runner import ensure_schema

PRIVATE = "PRIVATE-LINE root:x:0:0"


def _folder(tmp_path: Path, name: str, link: str) -> Path:
    folder = tmp_path / "snapshots"
    folder.mkdir()
    secret = tmp_path / "private.txt"
    secret.write_text(PRIVATE + "\n")
    (folder / name).write_text('{"apiVersion": "v1", "kind": "List", "items": []}\n')
    (folder / link).symlink_to(secret)
    return folder


def test_kubernetes_snapshot_folders_skip_symlinks(tmp_path: Path, caplog):
    folder = _folder(tmp_path, "workloads-20260112T000000Z.json",
                     "workloads-20260112T001000Z.json")
    with caplog.at_level(logging.WARNING):
        files = snapshot_files(folder)
    assert [p.name for _, p in files] == ["workloads-20260112T000000Z.json"]
    assert "found a symlink" in caplog.text
    con = duckdb.connect()
    ensure_schema(con)
    _workloads(con, folder, ("nvidia.com/gpu",), "c")
    raw = con.execute("SELECT string_agg(raw, '') FROM rejects").fetchone()[0] or ""
    assert PRIVATE not in raw


def test_scontrol_snapshot_folders_skip_symlinks(tmp_path: Path, caplog):
    folder = _folder(tmp_path, "scontrol-20260112T000000Z.txt", "scontrol-20260112T001000Z.txt")
    with caplog.at_level(logging.WARNING):
        files = snapshot_folder_files(folder)
    assert [p.name for p in files] == ["scontrol-20260112T000000Z.txt"]
    assert "scontrol-20260112T001000Z.txt: skipped" in caplog.text
