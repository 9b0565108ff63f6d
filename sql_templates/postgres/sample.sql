{# A repeatable sample drawn by the server: BERNOULLI keeps each row with
   probability pct/100 (about `rows` rows). #}
SELECT {% for c in columns %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}

FROM {{ relation }}
{% if not whole %}
TABLESAMPLE BERNOULLI ({{ pct | lit }}) REPEATABLE ({{ seed | lit }})
{% endif %}
