{# For each of the `signed_zeros` columns (FLOAT or DOUBLE): whether it
   holds both -0.0 and 0.0 (`__sqlanon_z<i>`), which DuckDB's table storage
   (compressed at a checkpoint) may turn into one another: DuckDB 1.4
   compares them equal. PostgreSQL has no signbit(); its text form of -0.0
   is '-0'. Included after the first item of a SELECT list. #}
{% for c in signed_zeros %}
{% if dialect == "postgres" %}
    , bool_or({{ c | ident }} = 0 AND {{ c | ident }}::text = '-0') AND bool_or({{ c | ident }} = 0 AND {{ c | ident }}::text = '0') AS {{ ("__sqlanon_z" ~ loop.index0) | ident }}
{% else %}
    , bool_or({{ c | ident }} = 0 AND signbit({{ c | ident }})) AND bool_or({{ c | ident }} = 0 AND NOT signbit({{ c | ident }})) AS {{ ("__sqlanon_z" ~ loop.index0) | ident }}
{% endif %}
{% endfor %}
