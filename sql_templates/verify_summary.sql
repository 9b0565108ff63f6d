{# k-anonymity / l-diversity summary of a generalized relation; per
   sensitive column its fewest distinct values in a class (`__sqlanon_l_i`),
   then how many classes reach l only with NULL counted as one of them
   (`__sqlanon_by_null_i`). #}
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
{% for s in sensitive %}
    , count(*) FILTER (WHERE {{ ("__sqlanon_l_" ~ loop.index0) | ident }} >= {{ p(l) }}
                         AND {{ ("__sqlanon_l_" ~ loop.index0) | ident }} - {{ ("__sqlanon_null_" ~ loop.index0) | ident }} < {{ p(l) }})
        AS {{ ("__sqlanon_by_null_" ~ loop.index0) | ident }}
{% endfor %}
FROM "__sqlanon_classes"
