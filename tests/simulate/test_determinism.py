import hashlib
from pathlib import Path

from simulator.cli_args import main
from simulator.engine import is_output_file
from tests.simulate.conftest import TEST_ARGS


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_same_seed_gives_byte_identical_files(world_dir: Path, tmp_path: Path):
    again = tmp_path / "second-run"
    assert main([*TEST_ARGS, "--out", str(again)]) == 0
    first, second = _hashes(world_dir), _hashes(again)
    assert sorted(first) == sorted(second)
    assert first == second
    assert [f for f in first if not is_output_file(f)] == [], "unexpected files in the world folder"
    assert "prometheus/metrics.om" in first


def test_another_seed_gives_another_world(world_dir: Path, tmp_path: Path):
    other = tmp_path / "seed-8"
    args = [a if a != "7" else "8" for a in TEST_ARGS]
    assert main([*args, "--out", str(other), "--no-metrics"]) == 0
    a = (world_dir / "sacct" / "sacct-unitsep-epoch.txt").read_bytes()
    b = (other / "sacct" / "sacct-unitsep-epoch.txt").read_bytes()
    assert a != b
    header = (other / "truth" / "gpu_busy_seconds.csv").read_text(encoding="utf-8")
    assert header == "gpu_uuid,day,busy_seconds\n"
    assert not (other / "prometheus" / "metrics.om").exists()


def test_gzip_outputs_are_byte_identical_too(tmp_path: Path):
    args = ["--seed", "3", "--days", "1", "--nodes", "hpc=2,k8s=2,shared=1", "--gzip",
            "--step", "600", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    first, second = _hashes(tmp_path / "a"), _hashes(tmp_path / "b")
    assert first == second
    assert {"prometheus/metrics.om.gz", "sacct/sacct-P.txt.gz", "kueue/workloads.json.gz",
            "truth/allocations.csv.gz"} <= set(first)
