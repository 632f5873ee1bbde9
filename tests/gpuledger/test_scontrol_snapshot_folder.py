"""One listing of an scontrol snapshot folder for `gpuledger load` and Dagster's import:
plain and gzipped snapshots alike, oldest first by the time in the name."""

import gzip
from pathlib import Path

from gpuledger.ingest.slurm.scontrol import snapshot_folder_files


def test_gzipped_snapshots_are_listed_in_time_order(tmp_path: Path):
    (tmp_path / "scontrol-20260105T020000Z.txt").write_text("x", encoding="utf-8")
    with gzip.open(tmp_path / "scontrol-20260105T000000Z.txt.gz", "wt") as fh:
        fh.write("x")
    (tmp_path / "notes.txt").write_text("not a snapshot", encoding="utf-8")
    assert [p.name for p in snapshot_folder_files(tmp_path)] == [
        "scontrol-20260105T000000Z.txt.gz", "scontrol-20260105T020000Z.txt"]
    assert snapshot_folder_files(tmp_path / "absent") == []
    assert snapshot_folder_files(None) == []
