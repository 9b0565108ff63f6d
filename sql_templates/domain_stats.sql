{# Dataset-wide statistics in one aggregate pass: rows; per QI the NULL count
   and either min/max (interval columns: their span is all Mondrian needs) or
   the distinct count (other columns; a DISTINCT is the costly part on a
   server); per sensitive column the distinct count, a NULL counting as one. #}
SELECT
    count(*) AS n_rows
{% for c in qi %}
    , count(*) - count({{ c | ident }}) AS {{ ("nulls" ~ loop.index0) | ident }}
{% if c in interval %}
    , min({{ c | ident }}) AS {{ ("min" ~ loop.index0) | ident }}
    , max({{ c | ident }}) AS {{ ("max" ~ loop.index0) | ident }}
{% else %}
    , count(DISTINCT {{ c | ident }}) AS {{ ("d" ~ loop.index0) | ident }}
{% endif %}
{% endfor %}
{% for s in sensitive %}
    , count(DISTINCT {{ s | ident }}) + max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("s" ~ loop.index0) | ident }}
{% endfor %}
FROM {{ relation }}
