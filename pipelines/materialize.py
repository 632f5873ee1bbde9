"""Materialize every asset (and its checks) for a data folder: what `make demo` runs.

Unpartitioned assets run once; daily assets for each day of the world's window; weekly assets for
each ISO week touching it; the read-only snapshot is published last. Runs are recorded in
``$DAGSTER_HOME`` so `dagster dev` shows them afterwards.
"""

import argparse
import sys
from datetime import date, timedelta

import dagster as dg

from pipelines.definitions import defs as load_defs
from pipelines.defs.partitions import daily_partitions, weekly_partitions

# Assets that read everything else: run after every partition.
PUBLISH_LAST = ("published_ledger",)
# Actions on the present, not builds of the data: alerts evaluate the sources' last hours at the
# time of the run, which for a data folder of past days says nothing (docs/alerts.md).
NOT_BUILT = ("idle_gpu_alerts", "idle_gpu_digest")

# Dagster's console logger prints every event at DEBUG; progress lines come from here instead.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _plan(graph, days: list[str]) -> list[tuple[str, str | None, list]]:
    """(label, partition key, asset keys) in the order they must run."""
    last = {dg.AssetKey(k) for k in PUBLISH_LAST}
    skipped = last | {dg.AssetKey(k) for k in NOT_BUILT}
    keys = [k for k in graph.get_all_asset_keys() if k not in skipped]
    by_kind: dict[str, list[dg.AssetKey]] = {"none": [], "day": [], "week": []}
    for key in keys:
        partitions = graph.get(key).partitions_def
        kind = ("none" if partitions is None else "day" if partitions == daily_partitions
                else "week" if partitions == weekly_partitions else None)
        if kind is None:
            msg = (f"expected no, daily or weekly partitions on {key.to_user_string()}, "
                   f"found {partitions}")
            raise ValueError(msg)
        by_kind[kind].append(key)
    mondays = sorted({
        (date.fromisoformat(d) - timedelta(days=date.fromisoformat(d).weekday())).isoformat()
        for d in days
    })
    plan: list[tuple[str, str | None, list]] = [("unpartitioned assets", None, by_kind["none"])]
    plan += [(f"day {d}", d, by_kind["day"]) for d in days if by_kind["day"]]
    plan += [(f"ISO week of {m}", m, by_kind["week"]) for m in mondays if by_kind["week"]]
    plan.append(("the read-only snapshot", None, sorted(last)))
    return plan


def materialize_all(partition_keys: list[str] | None = None) -> bool:
    definitions = load_defs()
    instance = dg.DagsterInstance.get()
    everything = [*definitions.assets, *(definitions.asset_checks or [])]
    plan = _plan(definitions.resolve_asset_graph(), list(partition_keys or []))
    ok = True
    for number, (label, key, assets) in enumerate(plan, start=1):
        print(f"[{number}/{len(plan)}] {label}", file=sys.stderr)
        result = dg.materialize(
            everything,
            instance=instance,
            resources=definitions.resources,
            selection=dg.AssetSelection.assets(*assets),
            partition_key=key,
            raise_on_error=False,
            run_config=QUIET,
        )
        if not result.success:
            print(f"  failed: {label}", file=sys.stderr)
        ok &= result.success
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partition", action="append", default=[],
                        help="daily partition key (repeatable); weeks follow from the days")
    args = parser.parse_args()
    return 0 if materialize_all(args.partition) else 1


if __name__ == "__main__":
    sys.exit(main())
