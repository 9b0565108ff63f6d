{# Write a relation to a file with DuckDB. #}
COPY (SELECT * FROM {{ relation }}) TO {{ path | lit }}
{% if fmt == "parquet" %}
(FORMAT parquet, COMPRESSION {{ compression | lit }})
{% else %}
(FORMAT csv, HEADER true)
{% endif %}
