{# Whether DuckDB compares the text columns of `relation` as the server
   does (coordinator._server_orderable), one row per column with a
   collation: its name; `deterministic`, whether texts equal under it are
   equal bytes (a hierarchy's lists then match the same rows); `bytewise`,
   whether it orders texts by their UTF-8 bytes, as DuckDB does (the C or
   POSIX collation, or the database's own when that is, with libc, in a
   UTF8 database: in KOI8R its bytes order Cyrillic otherwise, helper-179).
   By the column's collation's oid, in pg_collation, which any role may
   read (its name would need USAGE on its schema: helper-179). #}
SELECT a.attname AS name, c.collisdeterministic AS deterministic,
    getdatabaseencoding() = 'UTF8' AND (c.collname IN ('C', 'POSIX') AND c.collnamespace = 'pg_catalog'::regnamespace
        OR c.oid = 'pg_catalog.default'::regcollation AND coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') = 'c'
           AND d.datcollate IN ('C', 'POSIX')) AS bytewise
FROM pg_attribute a
JOIN pg_collation c ON c.oid = a.attcollation
JOIN pg_database d ON d.datname = current_database()
WHERE a.attrelid = to_regclass({{ p(relation) }}) AND a.attnum > 0 AND NOT a.attisdropped
