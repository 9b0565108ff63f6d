{# The CTE `classes`: one row per equivalence class of `relation` (GROUP BY
   the generalized QIs; NULLs group together) with its row count `n_rows` and,
   per sensitive column i, its distinct-value count `l_i` (a NULL counts as
   one value). With at most one sensitive column the distinct count comes from
   a second GROUP BY instead of count(DISTINCT …), which PostgreSQL can only
   compute by sorting; both are hash aggregates. Included by the verify_*
   templates. #}
{% set keys %}{% for c in qi %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}{% endset %}
{% if sensitive | length == 1 %}
pairs AS (
    SELECT {{ keys }}, count(*) AS n
    FROM {{ relation }}
    GROUP BY {{ keys }}, {{ sensitive[0] | ident }}
),
classes AS (
    SELECT {{ keys }}, sum(n) AS n_rows, count(*) AS {{ "l_0" | ident }}
    FROM pairs
    GROUP BY {{ keys }}
)
{% else %}
classes AS (
    SELECT {{ keys }}, count(*) AS n_rows
{% for s in sensitive %}
        , count(DISTINCT {{ s | ident }}) + max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("l_" ~ loop.index0) | ident }}
{% endfor %}
    FROM {{ relation }}
    GROUP BY {{ keys }}
)
{% endif %}
