-- resolve_identity
-- Grain: one row per piece_id of the relation `identity_pieces` (a view the runner creates).
-- Input columns: piece_id, domain ('slurm'|'kubernetes'), day (DATE, the UTC day of the piece),
--   slurm_user, slurm_account, k8s_namespace, k8s_service_account ('ns/sa'),
--   kueue_queue ('ns/localqueue'), kueue_cluster_queue, pod_labels (VARCHAR[] of 'label=value').
-- Output: person, team, cost_centre, each taken from the first matching row (by precedence)
--   in which it is non-empty and valid on `day`; 'unattributed' when no row gives it.
--   identity_evidence names the rows used; identity_source names the source of the first
--   matching row that gives any of the three (identity_map, slurm_assoc, namespace_labels),
--   'unattributed' when none does.
-- Rows come from identity_map (tier 0) and from identity_candidates, the owners the sources
--   name (tier 1: sacctmgr associations, kube_namespace_labels). THE precedence, one rule for
--   every field and for identity_source: tier, then the key precedence below, then the latest
--   valid_from. So the identity map overrides every source, on any key.
-- Precedence (docs/contracts.md): Slurm: slurm_user, slurm_account, parent accounts nearest
--   first. Kubernetes: pod_label (label-name order), k8s_service_account, k8s_namespace,
--   kueue_queue (LocalQueue), kueue_queue (ClusterQueue).
WITH RECURSIVE ancestry (account, ancestor, depth) AS (
    SELECT account, account, 0 FROM slurm_accounts
    UNION ALL
    SELECT a.account, t.parent, a.depth + 1
    FROM ancestry AS a
    INNER JOIN slurm_accounts AS t ON t.account = a.ancestor
    WHERE t.parent <> '' AND a.depth < 64
),

pieces AS (
    SELECT * FROM identity_pieces
),

slurm_candidates AS (
    SELECT piece_id, day, 0 AS rank, 'slurm_user' AS kind, slurm_user AS key
    FROM pieces WHERE domain = 'slurm' AND coalesce(slurm_user, '') <> ''
    UNION ALL
    SELECT p.piece_id, p.day, 1 + coalesce(an.depth, 0), 'slurm_account',
        coalesce(an.ancestor, p.slurm_account)
    FROM pieces AS p
    LEFT JOIN ancestry AS an ON an.account = p.slurm_account
    WHERE p.domain = 'slurm' AND coalesce(p.slurm_account, '') <> ''
),

label_candidates AS (
    SELECT piece_id, day, label_rank AS rank, 'pod_label' AS kind, label AS key
    FROM (
        SELECT piece_id, day, unnest(list_sort(pod_labels)) AS label,
            generate_subscripts(list_sort(pod_labels), 1) - 1 AS label_rank
        FROM pieces
        WHERE domain = 'kubernetes' AND pod_labels IS NOT NULL AND len(pod_labels) > 0
    )
),

k8s_candidates AS (
    SELECT * FROM label_candidates
    UNION ALL
    SELECT piece_id, day, 1000, 'k8s_service_account', k8s_service_account
    FROM pieces WHERE domain = 'kubernetes' AND coalesce(k8s_service_account, '') <> ''
    UNION ALL
    SELECT piece_id, day, 1001, 'k8s_namespace', k8s_namespace
    FROM pieces WHERE domain = 'kubernetes' AND coalesce(k8s_namespace, '') <> ''
    UNION ALL
    SELECT piece_id, day, 1002, 'kueue_queue', kueue_queue
    FROM pieces WHERE domain = 'kubernetes' AND coalesce(kueue_queue, '') <> ''
    UNION ALL
    SELECT piece_id, day, 1003, 'kueue_queue', kueue_cluster_queue
    FROM pieces WHERE domain = 'kubernetes' AND coalesce(kueue_cluster_queue, '') <> ''
),

owners AS (
    SELECT 0 AS tier, 'identity_map' AS source, '' AS cluster, source_kind, key, person, team,
        cost_centre, valid_from, valid_to
    FROM identity_map
    UNION ALL
    -- a candidate changed during a day applies from that day (valid_to closes the old one)
    SELECT 1, source, cluster, source_kind, key, person, team, cost_centre,
        valid_from::DATE, valid_to::DATE
    FROM identity_candidates
),

matched AS (
    SELECT
        c.piece_id,
        m.tier,
        c.rank,
        m.source,
        m.cluster,
        m.person,
        m.team,
        m.cost_centre,
        CASE WHEN m.tier = 0 THEN '' ELSE m.source || ' ' END
            || c.kind || ':' || c.key AS evidence,
        -- THE precedence (smallest first): tier (identity_map before the sources), key rank,
        -- the latest valid_from among rows for the same key, then cluster (deterministic)
        (m.tier, c.rank, -epoch(coalesce(m.valid_from, DATE '0001-01-01')), m.cluster)
            AS precedence
    FROM (SELECT * FROM slurm_candidates UNION ALL SELECT * FROM k8s_candidates) AS c
    INNER JOIN owners AS m
        ON m.source_kind = c.kind
        AND m.key = c.key
        AND (m.valid_from IS NULL OR m.valid_from <= c.day)
        AND (m.valid_to IS NULL OR c.day < m.valid_to)
),

final AS (
    SELECT
        p.piece_id,
        coalesce(
            arg_min(m.person, m.precedence) FILTER (WHERE m.person <> ''),
            'unattributed'
        ) AS person,
        coalesce(
            arg_min(m.team, m.precedence) FILTER (WHERE m.team <> ''),
            'unattributed'
        ) AS team,
        coalesce(
            arg_min(m.cost_centre, m.precedence) FILTER (WHERE m.cost_centre <> ''),
            'unattributed'
        ) AS cost_centre,
        coalesce(string_agg(DISTINCT m.evidence, ', ' ORDER BY m.evidence), '')
            AS identity_evidence,
        coalesce(
            arg_min(m.source, m.precedence)
                FILTER (WHERE m.person <> '' OR m.team <> '' OR m.cost_centre <> ''),
            'unattributed'
        ) AS identity_source
    FROM pieces AS p
    LEFT JOIN matched AS m USING (piece_id)
    GROUP BY p.piece_id
)

SELECT * FROM final
