{# PostgreSQL: the same figures as ../domain_stats.sql, but every distinct
   count is a hash GROUP BY in a scalar subquery instead of count(DISTINCT …),
   which PostgreSQL can only compute by sorting (slow on text under a
   linguistic collation). One statement: every subquery reads the same
   snapshot. #}
SELECT
    count(*) AS n_rows
{% for c in qi %}
    , count(*) - count({{ c | ident }}) AS {{ ("nulls" ~ loop.index0) | ident }}
{% if c in interval %}
    , min({{ c | ident }}) AS {{ ("min" ~ loop.index0) | ident }}
    , max({{ c | ident }}) AS {{ ("max" ~ loop.index0) | ident }}
{% else %}
    , (SELECT count(*) FROM (SELECT {{ c | ident }} FROM {{ relation }} WHERE {{ c | ident }} IS NOT NULL GROUP BY {{ c | ident }}) AS v) AS {{ ("d" ~ loop.index0) | ident }}
{% endif %}
{% endfor %}
{% for s in sensitive %}
    {# GROUP BY puts the NULLs in one group: a NULL counts as one value #}
    , (SELECT count(*) FROM (SELECT {{ s | ident }} FROM {{ relation }} GROUP BY {{ s | ident }}) AS v) AS {{ ("s" ~ loop.index0) | ident }}
{% endfor %}
FROM {{ relation }}
