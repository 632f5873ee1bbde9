import dagster as dg

from pipelines.defs.resources import LedgerResource


def _rejects_check(ledger: LedgerResource, source: str) -> dg.AssetCheckResult:
    with ledger.ledger() as con:
        rows = con.execute(
            "SELECT source_file, line_no, field, reason FROM rejects WHERE source = ? "
            "ORDER BY source_file, line_no",
            [source],
        ).fetchall()
    sample = "\n".join(f"- {f}:{n} field {fld}: {why}" for f, n, fld, why in rows[:20])
    return dg.AssetCheckResult(
        passed=not rows,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"rejected": len(rows), "offending_rows": dg.MetadataValue.md(sample or "none")},
    )


@dg.asset_check(asset="identity_map", description="Every identity-map line was loaded.")
def identity_map_has_no_rejects(ledger: LedgerResource) -> dg.AssetCheckResult:
    return _rejects_check(ledger, "identity_map")


@dg.asset_check(asset="rate_card", description="Every rate-card line was loaded.")
def rate_card_has_no_rejects(ledger: LedgerResource) -> dg.AssetCheckResult:
    return _rejects_check(ledger, "rate_card")


@dg.asset_check(asset="gpu_inventory",
                description="Each node lists exactly gpu_count GPUs with distinct UUIDs.")
def gpu_inventory_is_consistent(ledger: LedgerResource) -> dg.AssetCheckResult:
    with ledger.ledger() as con:
        rows = con.execute(
            """
            SELECT cluster, node, any_value(gpu_count) AS declared, count(*) AS listed,
                   count(DISTINCT gpu_uuid) AS uuids
            FROM nodes GROUP BY cluster, node
            HAVING count(*) <> any_value(gpu_count) OR count(DISTINCT gpu_uuid) <> count(*)
               OR count(DISTINCT gpu_count) > 1
            ORDER BY cluster, node
            """
        ).fetchall()
    sample = "\n".join(f"- {c}/{n}: declared {d}, listed {k}, uuids {u}" for c, n, d, k, u in rows)
    return dg.AssetCheckResult(
        passed=not rows,
        metadata={"offending_nodes": len(rows), "rows": dg.MetadataValue.md(sample or "none")},
    )
