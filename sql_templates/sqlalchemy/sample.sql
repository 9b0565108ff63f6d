{# The portable sample for the other SQLAlchemy databases (no TABLESAMPLE
   there): a seeded hash of each row's number (_hash_sample.sql). #}
SELECT {% for c in columns %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}

{% if whole %}
FROM {{ relation }}
{% else %}
{% include "_hash_sample.sql" %}
{% endif %}
