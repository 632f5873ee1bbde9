"""Small helpers shared by tests (imported as ``tests.helpers``)."""

import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Rows (week, cost centre) where the invoice lines' GPU-seconds differ from the ledger's: the
# published snapshot must always give none (issue #13).
INVOICE_DIFFERS_FROM_LEDGER = """
WITH ledger AS (
    SELECT strftime(day, '%G-W%V') AS week, cost_centre, sum(gpu_seconds) AS s
    FROM allocations GROUP BY ALL
), invoiced AS (
    SELECT period AS week, cost_centre, sum(gpu_seconds) AS s
    FROM chargeback GROUP BY ALL
)
SELECT coalesce(l.week, i.week), coalesce(l.cost_centre, i.cost_centre), l.s, i.s
FROM ledger AS l FULL JOIN invoiced AS i USING (week, cost_centre)
WHERE l.s IS NULL OR i.s IS NULL OR l.s <> i.s
"""
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
