"""Small helpers shared by tests (imported as ``tests.helpers``)."""

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLE_SITE = Path(__file__).resolve().parents[1] / "sample_data" / "gpuledger.toml"

# Rows (week, cost centre) where the invoice disagrees with the ledger: an open week's invoice
# lines must equal the ledger (issue #13); a closed week's invoice is its frozen lines, and the
# ledger minus them must equal the adjustments issued for it (issue #14). The published snapshot
# must always give none. Columns: week, cost centre, ledger, invoiced, adjusted GPU-seconds.
INVOICE_DIFFERS_FROM_LEDGER = """
WITH ledger AS (
    SELECT strftime(day, '%G-W%V') AS week, cost_centre, sum(gpu_seconds) AS s
    FROM allocations GROUP BY ALL
), invoiced AS (
    SELECT period AS week, cost_centre, sum(gpu_seconds) AS s
    FROM chargeback GROUP BY ALL
), adjusted AS (
    SELECT original_period AS week, cost_centre, sum(gpu_seconds) AS s
    FROM invoice_adjustments GROUP BY ALL
), lines AS (
    SELECT week, cost_centre, l.s AS ledger_s, i.s AS invoiced_s, a.s AS adjusted_s
    FROM ledger AS l FULL JOIN invoiced AS i USING (week, cost_centre)
    FULL JOIN adjusted AS a USING (week, cost_centre)
)
SELECT week, cost_centre, ledger_s, invoiced_s, adjusted_s FROM lines
WHERE CASE WHEN week IN (SELECT period FROM closed_periods)
    THEN coalesce(ledger_s, 0) <> coalesce(invoiced_s, 0) + coalesce(adjusted_s, 0)
    ELSE ledger_s IS NULL OR invoiced_s IS NULL OR ledger_s <> invoiced_s
        OR adjusted_s IS NOT NULL END
"""
TINY_WORLD = FIXTURES / "tiny_world"


def copy_tiny_world(dest: Path) -> Path:
    """A writable copy of the tiny world, so tests may break its files."""
    target = dest / "world"
    shutil.copytree(TINY_WORLD, target)
    return target


@contextmanager
def site_environment(site_file: Path) -> Iterator[None]:
    """``GPULEDGER_CONFIG=site_file`` for the block (Dagster reads the site from it)."""
    before = os.environ.get("GPULEDGER_CONFIG")
    os.environ["GPULEDGER_CONFIG"] = str(site_file)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("GPULEDGER_CONFIG", None)
        else:
            os.environ["GPULEDGER_CONFIG"] = before


def load_definitions(site_file: Path):
    """The project's Definitions built from ``site_file``.

    Partitions are made when ``pipelines.defs`` is imported (they start on the site's
    first_day), so a test switching to a site with another first_day imports it afresh.
    """
    import sys

    from gpuledger.site import load_site

    with site_environment(site_file):
        first_day = load_site(site_file).first_day
        partitions = sys.modules.get("pipelines.defs.partitions")
        if partitions is not None and first_day != partitions.FIRST_DAY:
            for name in [m for m in sys.modules
                         if m == "pipelines.definitions" or m.startswith("pipelines.defs")]:
                del sys.modules[name]
        from pipelines.definitions import defs as load_defs

        return load_defs()


def materialize_world(db: Path, world: Path, selection, partition_key: str | None = None):
    """Materialize the selected assets (and their checks) of the project against a temp ledger,
    from the world's site file (``<world>/gpuledger.toml``; a folder without one, for assets
    that read only the ledger, runs under the sample site)."""
    import dagster as dg

    site_file = world / "gpuledger.toml"
    if not site_file.is_file():
        site_file = SAMPLE_SITE
    defs = load_definitions(site_file)
    from pipelines.defs.resources import LedgerResource

    with site_environment(site_file):
        return dg.materialize(
            [*defs.assets, *(defs.asset_checks or [])],
            resources={**defs.resources, "ledger": LedgerResource(database=str(db))},
            selection=selection,
            partition_key=partition_key,
        )
