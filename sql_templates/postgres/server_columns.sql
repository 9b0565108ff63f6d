{# Name and server type of every column of `relation`, in order
   (format_type). A domain over numeric is reported as its base type: DuckDB
   reads it as it reads the base type (a double when unconstrained), so it is
   pulled as text and, in a table, created with the base type. A collation
   other than the type's own follows the type (_collation.sql), so a table
   created with these types compares and groups values as the source does. #}
SELECT
    a.attname,
    CASE WHEN t.typtype = 'd' AND t.typbasetype = 'numeric'::regtype
        THEN format_type(t.typbasetype, t.typtypmod) ELSE format_type(a.atttypid, a.atttypmod) END
    || ({% include "_collation.sql" %}) AS type
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = to_regclass({{ p(relation) }}) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
