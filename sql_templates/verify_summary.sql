{# k-anonymity / l-diversity summary of a generalized relation.
   A NULL counts as a value of its own, in GROUP BY as in the distinct count. #}
WITH classes AS (
    SELECT
        count(*) AS n_rows
{% for s in sensitive %}
        , count(DISTINCT {{ s | ident }}) + max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("l_" ~ loop.index0) | ident }}
{% endfor %}
    FROM {{ relation }}
    GROUP BY {% for c in qi %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}

)
SELECT
    count(*) AS classes,
    coalesce(sum(n_rows), 0) AS "rows",
    min(n_rows) AS min_class_size,
    coalesce(sum(n_rows * n_rows), 0) AS dp,
    count(*) FILTER (WHERE n_rows < {{ p(k) }}{% for s in sensitive %} OR {{ ("l_" ~ loop.index0) | ident }} < {{ p(l) }}{% endfor %}) AS violations
{% for s in sensitive %}
    , min({{ ("l_" ~ loop.index0) | ident }}) AS {{ ("l_" ~ loop.index0) | ident }}
{% endfor %}
FROM classes
