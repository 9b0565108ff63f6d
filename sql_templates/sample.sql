{# A repeatable sample of the QI columns (reservoir: exactly `rows` rows). #}
SELECT {% for c in columns %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}

FROM {{ relation }}
{% if not whole %}
USING SAMPLE reservoir({{ rows | lit }} ROWS) REPEATABLE ({{ seed | lit }})
{% endif %}
