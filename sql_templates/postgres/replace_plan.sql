{# What replacing the table `old` by the staging table `new` must keep: the
   views that depend on `old`, its indexes, and both column lists (name,
   type and a collation other than the type's own, in order). `old` and
   `new` are quoted relation names, bound as literals and resolved by the
   server (regclass). #}
WITH o AS (SELECT {{ p(old) }}::regclass::oid AS oid), n AS (SELECT {{ p(new) }}::regclass::oid AS oid)
SELECT
    ARRAY(
        SELECT DISTINCT r.ev_class::regclass::text
        FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid, o
        WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
          AND d.refobjid = o.oid AND r.ev_class <> o.oid
        ORDER BY 1
    ) AS views,
    ARRAY(SELECT i.indexrelid::regclass::text FROM pg_index i, o WHERE i.indrelid = o.oid ORDER BY 1) AS indexes,
    ARRAY(
        SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ({% include "_collation.sql" %})
        FROM pg_attribute a, o WHERE a.attrelid = o.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
    ) AS old_columns,
    ARRAY(
        SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ({% include "_collation.sql" %})
        FROM pg_attribute a, n WHERE a.attrelid = n.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
    ) AS new_columns
