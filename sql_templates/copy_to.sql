{# Write a relation to a file with DuckDB; the `as_text` columns as text. #}
COPY (SELECT *{% if as_text %} REPLACE ({% for c in as_text %}CAST({{ c | ident }} AS VARCHAR) AS {{ c | ident }}{{ ", " if not loop.last }}{% endfor %}){% endif %} FROM {{ relation }}) TO {{ path | lit }}
{% if fmt == "parquet" %}
(FORMAT parquet, COMPRESSION {{ compression | lit }})
{% else %}
(FORMAT csv, HEADER true)
{% endif %}
