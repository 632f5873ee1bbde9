"""The Dagster project is built from the site file: it loads from one, fails clearly without one,
its partitions start on the site's first_day, and every step that opens the ledger is in the
one-slot pool."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from tests.helpers import TINY_WORLD, copy_tiny_world, load_definitions, site_environment

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_SITE = ROOT / "sample_data" / "gpuledger.toml"


def _python(code: str, cwd: Path, config: Path | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GPULEDGER_CONFIG"}
    env["PYTHONPATH"] = str(ROOT)
    if config is not None:
        env["GPULEDGER_CONFIG"] = str(config)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_definitions_load_from_the_site_file():
    defs = load_definitions(SAMPLE_SITE)
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert {"gpu_inventory", "identity_map", "slurm_accounts", "rate_card",
            "kueue_workload_snapshot", "slurm_jobs", "slurm_steps", "sreport_gpu",
            "slurm_gpu_indices", "allocations", "published_ledger"} <= keys
    check_names = {key.name for c in (defs.asset_checks or []) for key in c.check_keys}
    assert {"identity_map_has_no_rejects", "gpu_inventory_is_consistent"} <= check_names
    # the ledger is the site's (GPULEDGER_DB unset)
    with site_environment(SAMPLE_SITE):
        saved = os.environ.pop("GPULEDGER_DB", None)
        try:
            defs = load_definitions(SAMPLE_SITE)
        finally:
            if saved is not None:
                os.environ["GPULEDGER_DB"] = saved
    ledger = Path(defs.resources["ledger"].database)
    assert ledger == SAMPLE_SITE.parent / "../data/gpuledger.duckdb"


def test_without_a_site_file_the_definitions_name_both_ways_to_give_one(tmp_path: Path):
    done = _python("from pipelines.definitions import defs; defs()", tmp_path, None)
    assert done.returncode != 0
    assert "expected a site file: set GPULEDGER_CONFIG=" in done.stderr
    assert f"gpuledger.toml in the working folder ({tmp_path})" in done.stderr


def test_a_gpuledger_toml_in_the_working_folder_is_the_site(tmp_path: Path):
    world = copy_tiny_world(tmp_path)  # holds gpuledger.toml
    code = ("from pipelines.definitions import defs; d = defs(); "
            "print(d.resources['ledger'].database)")
    done = _python(code, world, None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{world}/data/gpuledger.duckdb"


def test_a_malformed_site_file_stops_the_definitions_naming_the_key(tmp_path: Path):
    bad = tmp_path / "gpuledger.toml"
    bad.write_text('[gpuledger]\nfirst_day = "2026-13-01"\n', encoding="utf-8")
    done = _python("from pipelines.definitions import defs; defs()", tmp_path, bad)
    assert done.returncode != 0
    assert f"{bad}: [gpuledger.first_day]: expected a date such as 2026-01-05" in done.stderr


def test_partitions_start_on_the_sites_first_day(tmp_path: Path):
    code = ("from pipelines.definitions import defs; d = defs(); "
            "from pipelines.defs.partitions import daily_partitions as a, weekly_partitions as w; "
            "print(a.get_first_partition_key(), f'{w.start:%Y-%m-%d}')")
    for site, day, monday in ((SAMPLE_SITE, "2026-01-05", "2026-01-05"),
                              (TINY_WORLD / "gpuledger.toml", "2026-11-30", "2026-11-30")):
        done = _python(code, tmp_path, site)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [day, monday]
    # a first day in mid-week: days start on it, weeks on its Monday
    text = SAMPLE_SITE.read_text(encoding="utf-8").replace('first_day = "2026-01-05"',
                                                           'first_day = "2026-01-08"')
    moved = SAMPLE_SITE.parent / f".test-site-{os.getpid()}.toml"  # relative paths stay valid
    moved.write_text(text, encoding="utf-8")
    try:
        done = _python(code, tmp_path, moved)
    finally:
        moved.unlink()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2026-01-08", "2026-01-05"]


def test_every_step_that_opens_the_ledger_is_in_the_ledger_pool():
    from pipelines.defs.resources import LEDGER_POOL

    defs = load_definitions(SAMPLE_SITE)
    graph = defs.resolve_asset_graph()
    ledger_steps, missing = [], []
    for node in [*defs.assets, *(defs.asset_checks or [])]:
        resolved = node if isinstance(node, dg.AssetsDefinition) else None
        if resolved is None:
            continue
        if "ledger" not in resolved.required_resource_keys:
            continue
        ledger_steps.append(resolved.node_def.name)
        if resolved.node_def.pool != LEDGER_POOL:
            missing.append(resolved.node_def.name)
    assert len(ledger_steps) >= 12
    assert {"slurm_jobs", "kubernetes_day", "slurm_gpu_indices", "allocations", "chargeback",
            "weekly_report", "incidents", "published_ledger"} <= set(ledger_steps)
    assert missing == []
    assert graph is not None


def test_the_instance_file_gives_the_ledger_pool_one_slot(tmp_path: Path):
    from pipelines.defs.resources import LEDGER_POOL

    (tmp_path / "dagster.yaml").write_text(
        (ROOT / "pipelines" / "dagster.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
        # the pool's slots as Dagster counts them once a step asks for one
        instance.event_log_storage.initialize_concurrency_limit_to_default(LEDGER_POOL)
        assert instance.event_log_storage.get_concurrency_info(LEDGER_POOL).slot_count == 1


def test_no_future_annotations_in_dagster_modules():
    # `from __future__ import annotations` breaks Dagster's context annotations (1.13).
    root = ROOT / "pipelines"
    offenders = [p for p in root.rglob("*.py") if "from __future__ import annotations" in
                 p.read_text(encoding="utf-8")]
    assert offenders == []


def test_no_pipeline_module_names_a_simulator_file():
    names = ("world.json", "WorldFilesResource", "GPULEDGER_SAMPLE_DATA", "simulator",
             "gpuledger.simulate")
    offenders = [(p.name, n) for p in (ROOT / "pipelines").rglob("*.py")
                 for n in names if n in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_dg_check_defs_passes():
    dg_cli = Path(sys.executable).with_name("dg")
    env = {**os.environ, "GPULEDGER_CONFIG": str(SAMPLE_SITE)}
    done = subprocess.run([str(dg_cli), "check", "defs"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "All definitions loaded successfully" in done.stdout + done.stderr
