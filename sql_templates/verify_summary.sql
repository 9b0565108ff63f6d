{# k-anonymity / l-diversity summary of a generalized relation. #}
WITH
{% include "_classes.sql" %}

SELECT
    count(*) AS classes,
    coalesce(sum("__sqlanon_rows"), 0) AS "rows",
    min("__sqlanon_rows") AS min_class_size,
    max("__sqlanon_rows") AS max_class_size,
    coalesce(sum("__sqlanon_rows" * "__sqlanon_rows"), 0) AS dp,
    count(*) FILTER (WHERE "__sqlanon_rows" < {{ p(k) }}{% for s in sensitive %} OR {{ ("__sqlanon_l_" ~ loop.index0) | ident }} < {{ p(l) }}{% endfor %}) AS violations,
    coalesce(sum("__sqlanon_rows") FILTER (WHERE "__sqlanon_rows" < {{ p(k) }}{% for s in sensitive %} OR {{ ("__sqlanon_l_" ~ loop.index0) | ident }} < {{ p(l) }}{% endfor %}), 0) AS violating_rows
{% for s in sensitive %}
    , min({{ ("__sqlanon_l_" ~ loop.index0) | ident }}) AS {{ ("__sqlanon_l_" ~ loop.index0) | ident }}
{% endfor %}
FROM "__sqlanon_classes"
