{# Whether any of the `columns` (FLOAT or DOUBLE) of `relation` holds a
   negative zero: DuckDB's Parquet writer makes -0.0 and 0.0 one entry of a
   column's dictionary (duckdb/duckdb#25781), so such data is written without
   dictionaries. #}
SELECT coalesce(bool_or({% for c in columns %}({{ c | ident }} = 0 AND signbit({{ c | ident }})){% if not loop.last %} OR {% endif %}{% endfor %}), false)
FROM {{ relation }}
