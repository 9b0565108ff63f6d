{# Does a DuckDB table exist? DuckDB matches identifiers case-insensitively,
   quoted or not ("REPORT" names the table report), so this check does too. #}
SELECT count(*)
FROM information_schema.tables
WHERE table_catalog = {{ p(catalog) }}
  AND lower(table_schema) = lower({{ p(schema) }})
  AND lower(table_name) = lower({{ p(table) }})
