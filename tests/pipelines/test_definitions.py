import dagster as dg

from pipelines.definitions import defs as load_defs


def test_definitions_load():
    defs = load_defs()
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert {"gpu_inventory", "identity_map", "slurm_accounts", "rate_card",
            "kueue_workload_snapshot", "slurm_jobs", "slurm_steps", "sreport_gpu", "allocations",
            "published_ledger"} <= keys
    check_names = {
        key.name for c in (defs.asset_checks or []) for key in c.check_keys
    }
    assert {"identity_map_has_no_rejects", "gpu_inventory_is_consistent"} <= check_names


def test_no_future_annotations_in_dagster_modules():
    # `from __future__ import annotations` breaks Dagster's context annotations (1.13).
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "pipelines"
    offenders = [p for p in root.rglob("*.py") if "from __future__ import annotations" in
                 p.read_text(encoding="utf-8")]
    assert offenders == []


def test_dg_check_defs_passes():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    dg_cli = Path(sys.executable).with_name("dg")
    done = subprocess.run([str(dg_cli), "check", "defs"], cwd=root, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "All definitions loaded successfully" in done.stdout + done.stderr
