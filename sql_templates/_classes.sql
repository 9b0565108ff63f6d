{# The CTE `__sqlanon_classes`: one row per equivalence class of `relation` (GROUP BY
   the generalized QIs; NULLs group together) with its row count `__sqlanon_rows` and,
   per sensitive column i, its distinct-value count `__sqlanon_l_i` (a NULL counts as
   one value, and a NaN of a `nan_null` column is that NULL: both say "no value",
   and pandas reads both as NaN; DuckDB and PostgreSQL hold NaN equal to NaN).
   With at most one sensitive column the distinct count comes from a second
   GROUP BY instead of count(DISTINCT …), which PostgreSQL can only compute by
   sorting; both are hash aggregates. Included by the verify_* templates.
   `signed`: the float QIs, whose -0.0 and 0.0 SQL holds equal while every
   reader prints and tells them apart (a rounded -0.3 kg, a class of one to
   pandas, was verified inside a class of 0.0s: helper-68); a key of their
   sign at zero keeps them apart. `__sqlanon_null_i`: 1 when the class holds
   that NULL (a class reaching l only by it is warned about). #}
{% set keys %}{% for c in qi %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}{% endset %}
{% set signs %}{% for c in signed %}, {% if dialect == "postgres" %}({{ c | ident }} = 0 AND {{ c | ident }}::text = '-0'){% else %}({{ c | ident }} = 0 AND signbit({{ c | ident }})){% endif %}{% endfor %}{% endset %}
{% if sensitive | length == 1 %}
"__sqlanon_pairs" AS (
    SELECT {{ keys }}{% for c in signed %}, {% if dialect == "postgres" %}({{ c | ident }} = 0 AND {{ c | ident }}::text = '-0'){% else %}({{ c | ident }} = 0 AND signbit({{ c | ident }})){% endif %} AS {{ ("__sqlanon_neg" ~ loop.index0) | ident }}{% endfor %}, count(*) AS "__sqlanon_n",
           CASE WHEN {% if sensitive[0] in nan_null %}NULLIF({{ sensitive[0] | ident }}, 'NaN'){% else %}{{ sensitive[0] | ident }}{% endif %} IS NULL THEN 1 ELSE 0 END AS "__sqlanon_isnull"
    FROM {{ relation }}
    GROUP BY {{ keys }}{{ signs }}, {% if sensitive[0] in nan_null %}NULLIF({{ sensitive[0] | ident }}, 'NaN'){% else %}{{ sensitive[0] | ident }}{% endif %}
),
"__sqlanon_classes" AS (
    SELECT {{ keys }}, sum("__sqlanon_n") AS "__sqlanon_rows", count(*) AS {{ "__sqlanon_l_0" | ident }},
           max("__sqlanon_isnull") AS {{ "__sqlanon_null_0" | ident }}
    FROM "__sqlanon_pairs"
    GROUP BY {{ keys }}{% for c in signed %}, {{ ("__sqlanon_neg" ~ loop.index0) | ident }}{% endfor %}
)
{% else %}
"__sqlanon_classes" AS (
    SELECT {{ keys }}, count(*) AS "__sqlanon_rows"
{% for s in sensitive %}
{% if s in nan_null %}
        , count(DISTINCT NULLIF({{ s | ident }}, 'NaN')) + max(CASE WHEN NULLIF({{ s | ident }}, 'NaN') IS NULL THEN 1 ELSE 0 END) AS {{ ("__sqlanon_l_" ~ loop.index0) | ident }}
        , max(CASE WHEN NULLIF({{ s | ident }}, 'NaN') IS NULL THEN 1 ELSE 0 END) AS {{ ("__sqlanon_null_" ~ loop.index0) | ident }}
{% else %}
        , count(DISTINCT {{ s | ident }}) + max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("__sqlanon_l_" ~ loop.index0) | ident }}
        , max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("__sqlanon_null_" ~ loop.index0) | ident }}
{% endif %}
{% endfor %}
    FROM {{ relation }}
    GROUP BY {{ keys }}{{ signs }}
)
{% endif %}
