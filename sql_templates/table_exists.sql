{# Does a DuckDB table, and its schema, exist? Is it a view? Which other
   table's foreign key references it (one, which stops DROP TABLE; its own
   does not)? DuckDB matches identifiers case-insensitively, quoted or not
   ("REPORT" names the table report), so this check does too. #}
SELECT
    (SELECT count(*)
     FROM information_schema.schemata
     WHERE catalog_name = {{ p(catalog) }}
       AND lower(schema_name) = lower({{ p(schema) }})) AS schemas,
    (SELECT count(*)
     FROM information_schema.tables
     WHERE table_catalog = {{ p(catalog) }}
       AND lower(table_schema) = lower({{ p(schema) }})
       AND lower(table_name) = lower({{ p(table) }})) AS tables,
    (SELECT count(*)
     FROM information_schema.tables
     WHERE table_catalog = {{ p(catalog) }}
       AND lower(table_schema) = lower({{ p(schema) }})
       AND lower(table_name) = lower({{ p(table) }})
       AND table_type = 'VIEW') AS views,
    (SELECT min(table_name)
     FROM duckdb_constraints()
     WHERE database_name = {{ p(catalog) }}
       AND constraint_type = 'FOREIGN KEY'
       AND lower(schema_name) = lower({{ p(schema) }})
       AND lower(referenced_table) = lower({{ p(table) }})
       AND lower(table_name) <> lower({{ p(table) }})) AS referenced_by
