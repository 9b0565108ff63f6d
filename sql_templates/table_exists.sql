SELECT count(*)
FROM information_schema.tables
WHERE table_catalog = {{ p(catalog) }}
  AND table_schema = {{ p(schema) }}
  AND table_name = {{ p(table) }}
