{# A repeatable sample drawn by the server: BERNOULLI keeps each row with
   probability pct/100 (about `rows` rows). TABLESAMPLE applies to tables,
   materialized views and partitioned tables only: from a view (`samplable`
   false) a seeded hash of each row's number keeps the share instead
   (_hash_sample.sql; repeatable within the run's snapshot). #}
SELECT {% for c in columns %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}

{% if whole or samplable %}
FROM {{ relation }}
{% if not whole %}
TABLESAMPLE BERNOULLI ({{ pct | lit }}) REPEATABLE ({{ seed | lit }})
{% endif %}
{% else %}
{% include "_hash_sample.sql" %}
{% endif %}
