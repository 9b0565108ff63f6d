{# The last run that published `target` (as the metrics record it) in a
   metrics relation: its parameters (JSON text) and when it started. #}
SELECT "parameters", CAST("started_at" AS VARCHAR) AS "started"
FROM {{ relation }}
WHERE "kind" = 'total' AND "target" = {{ p(target) }}
ORDER BY "started_at" DESC
LIMIT 1
