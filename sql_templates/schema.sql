{# No rows: only the source's column names and types. #}
SELECT * FROM {{ relation }} LIMIT 0
