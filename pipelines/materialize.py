"""Materialize every asset (and its checks) for a data folder: what `make demo` runs.

Unpartitioned assets run once; partitioned assets run for each partition key that the world's
window covers. Runs are recorded in ``$DAGSTER_HOME`` so `dagster dev` shows them afterwards.
"""

import argparse
import sys

import dagster as dg

from pipelines.definitions import defs as load_defs

# Assets that read everything else: run after every partition.
PUBLISH_LAST = ("published_ledger",)


# Dagster's console logger prints every event at DEBUG; progress lines come from here instead.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def materialize_all(partition_keys: list[str] | None = None) -> bool:
    definitions = load_defs()
    graph = definitions.resolve_asset_graph()
    instance = dg.DagsterInstance.get()
    everything = [*definitions.assets, *(definitions.asset_checks or [])]
    last = {dg.AssetKey(k) for k in PUBLISH_LAST}
    unpartitioned = [
        key for key in graph.get_all_asset_keys()
        if graph.get(key).partitions_def is None and key not in last
    ]
    partitioned = [
        k for k in graph.get_all_asset_keys() if k not in set(unpartitioned) and k not in last
    ]
    ok = True
    print(f"materializing {len(unpartitioned)} unpartitioned assets", file=sys.stderr)
    result = dg.materialize(
        everything,
        instance=instance,
        resources=definitions.resources,
        selection=dg.AssetSelection.assets(*unpartitioned),
        raise_on_error=False,
        run_config=QUIET,
    )
    ok &= result.success
    for number, key in enumerate(partition_keys or [], start=1):
        if not partitioned:
            break
        print(f"[{number}/{len(partition_keys)}] partition {key}", file=sys.stderr)
        result = dg.materialize(
            everything,
            instance=instance,
            resources=definitions.resources,
            selection=dg.AssetSelection.assets(*partitioned),
            partition_key=key,
            raise_on_error=False,
        run_config=QUIET,
        )
        ok &= result.success
    print("publishing the read-only snapshot", file=sys.stderr)
    result = dg.materialize(everything, instance=instance, resources=definitions.resources,
                            selection=dg.AssetSelection.assets(*last), raise_on_error=False,
                            run_config=QUIET)
    return ok and result.success


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partition", action="append", default=[],
                        help="partition key for partitioned assets (repeatable)")
    args = parser.parse_args()
    return 0 if materialize_all(args.partition) else 1


if __name__ == "__main__":
    sys.exit(main())
