{# The CTE `__sqlanon_classes`: one row per equivalence class of `relation` (GROUP BY
   the generalized QIs; NULLs group together) with its row count `__sqlanon_rows` and,
   per sensitive column i, its distinct-value count `__sqlanon_l_i` (a NULL counts as
   one value). With at most one sensitive column the distinct count comes from
   a second GROUP BY instead of count(DISTINCT …), which PostgreSQL can only
   compute by sorting; both are hash aggregates. Included by the verify_*
   templates. #}
{% set keys %}{% for c in qi %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}{% endset %}
{% if sensitive | length == 1 %}
"__sqlanon_pairs" AS (
    SELECT {{ keys }}, count(*) AS "__sqlanon_n"
    FROM {{ relation }}
    GROUP BY {{ keys }}, {{ sensitive[0] | ident }}
),
"__sqlanon_classes" AS (
    SELECT {{ keys }}, sum("__sqlanon_n") AS "__sqlanon_rows", count(*) AS {{ "__sqlanon_l_0" | ident }}
    FROM "__sqlanon_pairs"
    GROUP BY {{ keys }}
)
{% else %}
"__sqlanon_classes" AS (
    SELECT {{ keys }}, count(*) AS "__sqlanon_rows"
{% for s in sensitive %}
        , count(DISTINCT {{ s | ident }}) + max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("__sqlanon_l_" ~ loop.index0) | ident }}
{% endfor %}
    FROM {{ relation }}
    GROUP BY {{ keys }}
)
{% endif %}
