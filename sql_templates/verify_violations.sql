{# The equivalence classes of a generalized relation that break k or l. #}
SELECT *
FROM (
    SELECT
{% for c in qi %}
        {{ c | ident }},
{% endfor %}
        count(*) AS "__rows"
{% for s in sensitive %}
        , count(DISTINCT {{ s | ident }}) + max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("__distinct_" ~ s) | ident }}
{% endfor %}
    FROM {{ relation }}
    GROUP BY {% for c in qi %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}

) AS classes
WHERE "__rows" < {{ p(k) }}
{% for s in sensitive %}
    OR {{ ("__distinct_" ~ s) | ident }} < {{ p(l) }}
{% endfor %}
ORDER BY "__rows"
LIMIT {{ p(limit) }}
