import dagster as dg

from pipelines.defs.resources import LEDGER_POOL, LedgerResource


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


@dg.asset_check(asset="identity_map", description="Every identity-map line was loaded.",
                pool=LEDGER_POOL)
def identity_map_has_no_rejects(ledger: LedgerResource) -> dg.AssetCheckResult:
    return _rejects_check(ledger, "identity_map")


@dg.asset_check(asset="rate_card", description="Every rate-card line was loaded.",
                pool=LEDGER_POOL)
def rate_card_has_no_rejects(ledger: LedgerResource) -> dg.AssetCheckResult:
    return _rejects_check(ledger, "rate_card")


@dg.asset_check(asset="gpu_inventory", pool=LEDGER_POOL,
                description="Each node lists exactly gpu_count GPUs with distinct UUIDs.")
def gpu_inventory_is_consistent(ledger: LedgerResource) -> dg.AssetCheckResult:
    with ledger.ledger() as con:
        rows = con.execute(
            """
            SELECT cluster, node, any_value(gpu_count) AS declared, count(*) AS listed,
                   count(DISTINCT gpu_uuid) AS uuids
            FROM nodes GROUP BY cluster, node
            -- a node only a source knows has no UUIDs (NULL): only known ones must differ
            HAVING count(*) <> any_value(gpu_count)
               OR count(DISTINCT gpu_uuid) <> count(gpu_uuid)
               OR count(DISTINCT gpu_count) > 1
            ORDER BY cluster, node
            """
        ).fetchall()
    sample = "\n".join(f"- {c}/{n}: declared {d}, listed {k}, uuids {u}" for c, n, d, k, u in rows)
    return dg.AssetCheckResult(
        passed=not rows,
        metadata={"offending_nodes": len(rows), "rows": dg.MetadataValue.md(sample or "none")},
    )


def _rejects_of(ledger: LedgerResource, sources: tuple[str, ...],
                k8s_metrics: tuple[str, ...] = ()) -> dg.AssetCheckResult:
    """The offending rows of `sources` in rejects (and of `k8s_metrics` in k8s_rejects)."""
    with ledger.ledger() as con:
        rows = con.execute(
            "SELECT source, source_file, line_no, field, reason FROM rejects "
            "WHERE list_contains(?::VARCHAR[], source) ORDER BY ALL", [list(sources)]).fetchall()
        samples = con.execute(
            "SELECT cluster, metric, series, reason FROM k8s_rejects "
            "WHERE list_contains(?::VARCHAR[], metric) ORDER BY ALL", [list(k8s_metrics)]
        ).fetchall() if k8s_metrics else []
    text = [f"- {s} {f}:{n} field {fld}: {why}" for s, f, n, fld, why in rows[:20]]
    text += [f"- {c} {m} {series}: {why}" for c, m, series, why in samples[:20]]
    return dg.AssetCheckResult(
        passed=not rows and not samples, severity=dg.AssetCheckSeverity.WARN,
        metadata={"rejected": len(rows) + len(samples),
                  "offending_rows": dg.MetadataValue.md("\n".join(text) or "none")},
    )


@dg.asset_check(asset="gpu_inventory", pool=LEDGER_POOL,
                description="Every scontrol line, KSM node sample and nodes-file line was read.")
def gpu_inventory_has_no_rejects(ledger: LedgerResource) -> dg.AssetCheckResult:
    return _rejects_of(ledger, ("scontrol_nodes", "nodes"),
                       ("kube_node_status_capacity", "kube_node_labels"))


@dg.asset_check(asset="slurm_accounts", pool=LEDGER_POOL,
                description="Every sacctmgr association and accounts-file line was read.")
def slurm_accounts_have_no_rejects(ledger: LedgerResource) -> dg.AssetCheckResult:
    return _rejects_of(ledger, ("sacctmgr_assoc", "slurm_accounts"))


@dg.asset_check(asset="identity_candidates", pool=LEDGER_POOL,
                description="Every kube_namespace_labels sample was usable.")
def identity_candidates_have_no_rejects(ledger: LedgerResource) -> dg.AssetCheckResult:
    return _rejects_of(ledger, ("sacctmgr_assoc",), ("kube_namespace_labels",))
