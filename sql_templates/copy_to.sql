{# Write a relation to a file with DuckDB; the `as_text` columns as text;
   Parquet: without dictionaries when `plain` (see negative_zero.sql), with
   `arrow_schema` as its ARROW:schema (io.restorable_fields), in row groups
   of `row_group_size` rows when given;
   CSV: separated by `delim`, compressed with `compression` (or 'none'). #}
COPY (SELECT *{% if as_text %} REPLACE ({% for c in as_text %}CAST({{ c | ident }} AS VARCHAR) AS {{ c | ident }}{{ ", " if not loop.last }}{% endfor %}){% endif %} FROM {{ relation }}) TO {{ path | lit }}
{% if fmt == "parquet" %}
(FORMAT parquet, COMPRESSION {{ compression | lit }}{% if plain %}, DICTIONARY_SIZE_LIMIT 0{% endif %}{% if row_group_size %}, ROW_GROUP_SIZE {{ row_group_size | lit }}{% endif %}{% if arrow_schema %}, KV_METADATA {'ARROW:schema': {{ arrow_schema | lit }}}{% endif %})
{% else %}
(FORMAT csv, HEADER true, DELIMITER {{ delim | lit }}, COMPRESSION {{ compression | lit }})
{% endif %}
