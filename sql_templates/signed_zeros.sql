{# Which of the `signed_zeros` columns of `relation` hold both -0.0 and 0.0
   (_signed_zeros.sql): the parts a run wrote, where the input's own SQL
   cannot tell (SQLite prints -0.0 as 0.0 and has no signbit()). #}
SELECT count(*)
{% include "_signed_zeros.sql" %}
FROM {{ relation }}
