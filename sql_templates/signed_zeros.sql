{# For each of the `columns` (FLOAT or DOUBLE) of `relation`: whether it
   holds both -0.0 and 0.0, which DuckDB's table storage (compressed at a
   checkpoint) may turn into one another: DuckDB 1.4 compares them equal.
   PostgreSQL has no signbit(); its text form of -0.0 is '-0'. #}
SELECT
{% for c in columns %}
{% if dialect == "postgres" %}
    bool_or({{ c | ident }} = 0 AND {{ c | ident }}::text = '-0') AND bool_or({{ c | ident }} = 0 AND {{ c | ident }}::text = '0') AS {{ ("z" ~ loop.index0) | ident }}{% if not loop.last %},{% endif %}
{% else %}
    bool_or({{ c | ident }} = 0 AND signbit({{ c | ident }})) AND bool_or({{ c | ident }} = 0 AND NOT signbit({{ c | ident }})) AS {{ ("z" ~ loop.index0) | ident }}{% if not loop.last %},{% endif %}
{% endif %}
{% endfor %}
FROM {{ relation }}
