{# Does a DuckDB table, and its schema, exist? Is it a view? Which other
   table's foreign key references it (one, which stops DROP TABLE; its own
   does not)? Its columns' names (a metrics table is never replaced by
   data)? DuckDB matches identifiers case-insensitively, quoted or not
   ("REPORT" names the table report), for ASCII letters only ('Émile' and
   'émile' are two tables), so this check does too: translate() with
   `upper` and `lower`, the ASCII letters, not the Unicode lower(). #}
SELECT
    (SELECT count(*)
     FROM information_schema.schemata
     WHERE catalog_name = {{ p(catalog) }}
       AND translate(schema_name, {{ p(upper) }}, {{ p(lower) }}) = translate({{ p(schema) }}, {{ p(upper) }}, {{ p(lower) }})) AS schemas,
    (SELECT count(*)
     FROM information_schema.tables
     WHERE table_catalog = {{ p(catalog) }}
       AND translate(table_schema, {{ p(upper) }}, {{ p(lower) }}) = translate({{ p(schema) }}, {{ p(upper) }}, {{ p(lower) }})
       AND translate(table_name, {{ p(upper) }}, {{ p(lower) }}) = translate({{ p(table) }}, {{ p(upper) }}, {{ p(lower) }})) AS tables,
    (SELECT count(*)
     FROM information_schema.tables
     WHERE table_catalog = {{ p(catalog) }}
       AND translate(table_schema, {{ p(upper) }}, {{ p(lower) }}) = translate({{ p(schema) }}, {{ p(upper) }}, {{ p(lower) }})
       AND translate(table_name, {{ p(upper) }}, {{ p(lower) }}) = translate({{ p(table) }}, {{ p(upper) }}, {{ p(lower) }})
       AND table_type = 'VIEW') AS views,
    (SELECT min(table_name)
     FROM duckdb_constraints()
     WHERE database_name = {{ p(catalog) }}
       AND constraint_type = 'FOREIGN KEY'
       AND translate(schema_name, {{ p(upper) }}, {{ p(lower) }}) = translate({{ p(schema) }}, {{ p(upper) }}, {{ p(lower) }})
       AND translate(referenced_table, {{ p(upper) }}, {{ p(lower) }}) = translate({{ p(table) }}, {{ p(upper) }}, {{ p(lower) }})
       AND translate(table_name, {{ p(upper) }}, {{ p(lower) }}) <> translate({{ p(table) }}, {{ p(upper) }}, {{ p(lower) }})) AS referenced_by,
    (SELECT coalesce(list(column_name), [])
     FROM duckdb_columns()
     WHERE database_name = {{ p(catalog) }}
       AND translate(schema_name, {{ p(upper) }}, {{ p(lower) }}) = translate({{ p(schema) }}, {{ p(upper) }}, {{ p(lower) }})
       AND translate(table_name, {{ p(upper) }}, {{ p(lower) }}) = translate({{ p(table) }}, {{ p(upper) }}, {{ p(lower) }})) AS columns
