{# The CTE `__sqlanon_classes`: one row per equivalence class of `relation` (GROUP BY
   the generalized QIs; NULLs group together) with its row count `__sqlanon_rows` and,
   per sensitive column i, its distinct-value count `__sqlanon_l_i` (a NULL counts as
   one value). One aggregate: count(DISTINCT …) per class was 2.5x (DuckDB) and
   1.5x (PostgreSQL, with the verifier's work_mem) faster than a second GROUP
   BY over (class, sensitive value) pairs, BENCHMARKS section 2. Included by
   the verify_* templates. #}
{% set keys %}{% for c in qi %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}{% endset %}
"__sqlanon_classes" AS (
    SELECT {{ keys }}, count(*) AS "__sqlanon_rows"
{% for s in sensitive %}
        , count(DISTINCT {{ s | ident }}) + max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("__sqlanon_l_" ~ loop.index0) | ident }}
{% endfor %}
    FROM {{ relation }}
    GROUP BY {{ keys }}
)
