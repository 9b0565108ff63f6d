{# Per column of `columns` (CSV text that DuckDB reads as a timestamp or a
   time, to microseconds), how many values have more than six decimals of a
   second, which that reading cuts. `relation` reads the file as text. #}
SELECT
{% for c in columns %}
    count(*) FILTER (WHERE regexp_matches(trim({{ c | ident }}), '[0-9]:[0-9]{2}\.[0-9]{7,}')) AS {{ ("f" ~ loop.index0) | ident }}{% if not loop.last %},{% endif %}
{% endfor %}
FROM {{ relation }}
