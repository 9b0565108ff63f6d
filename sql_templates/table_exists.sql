{# Does a DuckDB table, and its schema, exist? Is it a view? Which other
   table's foreign key references it (one, which stops DROP TABLE; its own
   does not)? DuckDB matches identifiers case-insensitively, quoted or not
   ("REPORT" names the table report), for ASCII letters only ('Émile' and
   'émile' are two tables), so this check does too: translate(), not the
   Unicode lower(). #}
{% set upper %}'ABCDEFGHIJKLMNOPQRSTUVWXYZ'{% endset %}
{% set lower %}'abcdefghijklmnopqrstuvwxyz'{% endset %}
SELECT
    (SELECT count(*)
     FROM information_schema.schemata
     WHERE catalog_name = {{ p(catalog) }}
       AND translate(schema_name, {{ upper }}, {{ lower }}) = translate({{ p(schema) }}, {{ upper }}, {{ lower }})) AS schemas,
    (SELECT count(*)
     FROM information_schema.tables
     WHERE table_catalog = {{ p(catalog) }}
       AND translate(table_schema, {{ upper }}, {{ lower }}) = translate({{ p(schema) }}, {{ upper }}, {{ lower }})
       AND translate(table_name, {{ upper }}, {{ lower }}) = translate({{ p(table) }}, {{ upper }}, {{ lower }})) AS tables,
    (SELECT count(*)
     FROM information_schema.tables
     WHERE table_catalog = {{ p(catalog) }}
       AND translate(table_schema, {{ upper }}, {{ lower }}) = translate({{ p(schema) }}, {{ upper }}, {{ lower }})
       AND translate(table_name, {{ upper }}, {{ lower }}) = translate({{ p(table) }}, {{ upper }}, {{ lower }})
       AND table_type = 'VIEW') AS views,
    (SELECT min(table_name)
     FROM duckdb_constraints()
     WHERE database_name = {{ p(catalog) }}
       AND constraint_type = 'FOREIGN KEY'
       AND translate(schema_name, {{ upper }}, {{ lower }}) = translate({{ p(schema) }}, {{ upper }}, {{ lower }})
       AND translate(referenced_table, {{ upper }}, {{ lower }}) = translate({{ p(table) }}, {{ upper }}, {{ lower }})
       AND translate(table_name, {{ upper }}, {{ lower }}) <> translate({{ p(table) }}, {{ upper }}, {{ lower }})) AS referenced_by
