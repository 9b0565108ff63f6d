{# The equivalence classes of a generalized relation that break k or l; the
   `as_text` QI columns as text (DuckDB hands TIMESTAMPTZ values to Python
   only through pytz, which sqlanon does not depend on). #}
WITH
{% include "_classes.sql" %}

SELECT
{% for c in qi %}
    {% if c in as_text %}CAST({{ c | ident }} AS VARCHAR) AS {{ c | ident }}{% else %}{{ c | ident }}{% endif %},
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
