{# The equivalence classes of a generalized relation that break k or l. #}
WITH
{% include "_classes.sql" %}

SELECT
{% for c in qi %}
    {{ c | ident }},
{% endfor %}
    "__sqlanon_rows" AS "__rows"
{% for s in sensitive %}
    , {{ ("__sqlanon_l_" ~ loop.index0) | ident }} AS {{ ("__distinct_" ~ s) | ident }}
{% endfor %}
FROM "__sqlanon_classes"
WHERE "__sqlanon_rows" < {{ p(k) }}
{% for s in sensitive %}
    OR {{ ("__sqlanon_l_" ~ loop.index0) | ident }} < {{ p(l) }}
{% endfor %}
ORDER BY "__sqlanon_rows"
LIMIT {{ p(limit) }}
