{# The equivalence classes of a generalized relation that break k or l. #}
WITH
{% include "_classes.sql" %}

SELECT
{% for c in qi %}
    {{ c | ident }},
{% endfor %}
    n_rows AS "__rows"
{% for s in sensitive %}
    , {{ ("l_" ~ loop.index0) | ident }} AS {{ ("__distinct_" ~ s) | ident }}
{% endfor %}
FROM classes
WHERE n_rows < {{ p(k) }}
{% for s in sensitive %}
    OR {{ ("l_" ~ loop.index0) | ident }} < {{ p(l) }}
{% endfor %}
ORDER BY n_rows
LIMIT {{ p(limit) }}
