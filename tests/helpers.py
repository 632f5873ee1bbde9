"""Small helpers shared by tests (imported as ``tests.helpers``)."""

import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY_WORLD = FIXTURES / "tiny_world"


def copy_tiny_world(dest: Path) -> Path:
    """A writable copy of the tiny world, so tests may break its files."""
    target = dest / "world"
    shutil.copytree(TINY_WORLD, target)
    return target


def materialize_world(db: Path, world: Path, selection, partition_key: str | None = None):
    """Materialize the selected assets (and their checks) of the project against a temp ledger."""
    import dagster as dg

    from pipelines.definitions import defs as load_defs
    from pipelines.defs.resources import LedgerResource, WorldFilesResource
    from pipelines.defs.slurm.resources import slurm_source_from_environment

    defs = load_defs()
    return dg.materialize(
        [*defs.assets, *(defs.asset_checks or [])],
        resources={
            **defs.resources,
            "ledger": LedgerResource(database=str(db)),
            "world": WorldFilesResource(root=str(world)),
            "slurm": slurm_source_from_environment(str(world)),
        },
        selection=selection,
        partition_key=partition_key,
    )
