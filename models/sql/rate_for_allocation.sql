-- rate_for_allocation
-- Grain: one row per rate key (day, domain, gpu_model, qos) of the temp table rate_keys, with
--   the rate_card row that prices GPU time of that key; keys with no valid row get null rate
--   and currency (flagged by the callers, never priced at zero).
-- Parameters: none. Reads the temp table rate_keys (day DATE, domain VARCHAR, gpu_model VARCHAR,
--   qos VARCHAR, '' for none) and rate_card.
-- The one rate precedence of gpuledger (docs/accounting.md "How much: the rate card"), used by
--   the invoice lines (chargeback.sql) and the incidents' cost (detect_incidents.sql) alike:
--   rows for the GPU model valid that day (valid_from <= day < valid_to, either end open) whose
--   domain and qos are empty (any) or equal; the most specific wins (domain and qos, then domain
--   only, then qos only, then neither), then the latest valid_from (an open start is oldest).
WITH keys AS (
    SELECT DISTINCT day, domain, gpu_model, coalesce(qos, '') AS qos FROM rate_keys
),

candidates AS (
    SELECT
        k.day, k.domain, k.gpu_model, k.qos,
        r.rate_per_gpu_hour, r.currency, r.valid_from AS rate_valid_from,
        row_number() OVER (
            PARTITION BY k.day, k.domain, k.gpu_model, k.qos
            ORDER BY (r.domain <> '')::INT * 2 + (r.qos <> '')::INT DESC,
                     r.valid_from DESC NULLS LAST
        ) AS preference
    FROM keys AS k
    INNER JOIN rate_card AS r
        ON r.gpu_model = k.gpu_model
        AND (r.domain = '' OR r.domain = k.domain)
        AND (r.qos = '' OR r.qos = k.qos)
        AND (r.valid_from IS NULL OR r.valid_from <= k.day)
        AND (r.valid_to IS NULL OR k.day < r.valid_to)
)

SELECT
    k.day, k.domain, k.gpu_model, k.qos,
    c.rate_per_gpu_hour, c.currency, c.rate_valid_from
FROM keys AS k
LEFT JOIN candidates AS c
    ON c.preference = 1 AND c.day = k.day AND c.domain = k.domain
    AND c.gpu_model = k.gpu_model AND c.qos = k.qos
