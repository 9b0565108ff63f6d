{# k-anonymity / l-diversity summary of a generalized relation. #}
WITH
{% include "_classes.sql" %}

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
