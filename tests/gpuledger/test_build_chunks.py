"""`gpuledger build` works a week at a time (progress, bounded memory): the ledger it builds must
not depend on where the chunks fall."""

import json
import shutil
from pathlib import Path

import pytest

from gpuledger import cli
from models.runner import read_snapshot

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
TABLES = ("allocations", "gpu_usage_hourly", "node_usage_hourly", "chargeback_periods",
          "incidents", "bridge_pairs")


def _contents(db: Path) -> dict[str, list]:
    with read_snapshot(db) as con:
        return {t: con.execute(f"SELECT * EXCLUDE (incident_id) FROM {t} ORDER BY ALL").fetchall()
                if t == "incidents" else
                con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


@pytest.mark.slow
def test_chunked_build_equals_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]):
    loaded = tmp_path / "loaded.duckdb"
    assert cli.main(["--db", str(loaded), "load-world", str(SAMPLE)]) == 0
    window = json.loads((SAMPLE / "world.json").read_text())["window"]
    built = {}
    for chunk in (7, 3, 1):
        db = tmp_path / f"chunk{chunk}" / "ledger.duckdb"
        db.parent.mkdir()
        shutil.copy(loaded, db)
        monkeypatch.setattr(cli, "BUILD_CHUNK_DAYS", chunk)
        capsys.readouterr()
        assert cli.main(["--db", str(db), "build", "--start", window["start"],
                         "--end", window["end"]]) == 0
        err = capsys.readouterr().err
        weeks = -(-7 // chunk)
        assert f"[{weeks}/{weeks}] build" in err
        built[chunk] = _contents(db)
    assert all(built[7][t] for t in TABLES), "the sample world fills every table"
    for chunk in (3, 1):
        for t in TABLES:
            assert built[chunk][t] == built[7][t], (chunk, t)
