{# What replacing the table `old` by the staging table `new` must keep: the
   views that depend on `old`, its indexes, what else a swap would lose
   (`attached`: row-level security and its policies, triggers, check,
   foreign-key and exclusion constraints, partitions and inheritance,
   publications; `unkept`: NOT NULL, defaults; `owner`: the old table's
   owner when the publishing role is not it), and both column lists
   (name, type and a collation other than the type's own, in order; a
   generated column of `old`, which no INSERT may fill, never matches).
   `old` and `new` are quoted relation names, bound as literals and
   resolved by the server (regclass). #}
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
        SELECT 'row-level security' FROM pg_class c, o WHERE c.oid = o.oid AND (c.relrowsecurity OR c.relforcerowsecurity)
        UNION ALL
        SELECT * FROM (SELECT format('policy %I', pol.polname) FROM pg_policy pol, o WHERE pol.polrelid = o.oid ORDER BY 1) x
        UNION ALL
        SELECT * FROM (SELECT format('trigger %I', t.tgname) FROM pg_trigger t, o
                       WHERE t.tgrelid = o.oid AND NOT t.tgisinternal ORDER BY 1) x
        UNION ALL
        SELECT * FROM (SELECT format('constraint %I', con.conname) FROM pg_constraint con, o
                       WHERE con.conrelid = o.oid AND con.contype IN ('c', 'f', 'x', 't') ORDER BY 1) x
        UNION ALL
        SELECT 'partition of ' || i.inhparent::regclass::text FROM pg_inherits i, o WHERE i.inhrelid = o.oid
        UNION ALL
        SELECT * FROM (SELECT 'partition or child ' || i.inhrelid::regclass::text FROM pg_inherits i, o
                       WHERE i.inhparent = o.oid ORDER BY 1) x
        UNION ALL
        SELECT * FROM (SELECT format('publication %I', pub.pubname) FROM pg_publication_rel pr
                       JOIN pg_publication pub ON pub.oid = pr.prpubid, o WHERE pr.prrelid = o.oid ORDER BY 1) x
    ) AS attached,
    (SELECT CASE WHEN c.relowner <> (SELECT relowner FROM pg_class WHERE oid = n.oid)
                 THEN format('owner %I', pg_get_userbyid(c.relowner)) END
     FROM pg_class c, o, n WHERE c.oid = o.oid) AS owner,
    ARRAY(
        SELECT format(CASE WHEN a.attnotnull THEN 'NOT NULL on %I' ELSE 'the default of %I' END, a.attname)
        FROM pg_attribute a, o
        WHERE a.attrelid = o.oid AND a.attnum > 0 AND NOT a.attisdropped AND (a.attnotnull OR a.atthasdef)
        ORDER BY a.attnum
    ) AS unkept,
    ARRAY(
        SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ({% include "_collation.sql" %})
               || CASE WHEN a.attgenerated <> '' THEN ' generated' ELSE '' END
        FROM pg_attribute a, o WHERE a.attrelid = o.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
    ) AS old_columns,
    ARRAY(
        SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ({% include "_collation.sql" %})
        FROM pg_attribute a, n WHERE a.attrelid = n.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
    ) AS new_columns
