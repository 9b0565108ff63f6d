{# Write a relation to a file with DuckDB; the `as_text` columns as text;
   Parquet: without dictionaries when `plain` (see negative_zero.sql), with
   `arrow_schema` as its ARROW:schema (io.restorable_fields);
   CSV: separated by `delim`, compressed with `compression` (or 'none'). #}
COPY (SELECT *{% if as_text %} REPLACE ({% for c in as_text %}CAST({{ c | ident }} AS VARCHAR) AS {{ c | ident }}{{ ", " if not loop.last }}{% endfor %}){% endif %} FROM {{ relation }}) TO {{ path | lit }}
{% if fmt == "parquet" %}
(FORMAT parquet, COMPRESSION {{ compression | lit }}{% if plain %}, DICTIONARY_SIZE_LIMIT 0{% endif %}{% if arrow_schema %}, KV_METADATA {'ARROW:schema': {{ arrow_schema | lit }}}{% endif %})
{% else %}
(FORMAT csv, HEADER true, DELIMITER {{ delim | lit }}, COMPRESSION {{ compression | lit }})
{% endif %}
