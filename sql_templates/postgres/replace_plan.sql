{# What replacing the table `old` by the staging table `new` must keep: the
   objects that depend on `old` (`views`: views, functions with a SQL body
   or of its row type, tables with a column of its row type), its indexes,
   what else a swap would lose (`attached`: row-level security and its
   policies, triggers, rules, check, foreign-key and exclusion constraints,
   partitions and inheritance, publications; `unkept`: identities, NOT NULL, defaults,
   its tablespace, storage options, replica identity, UNLOGGED, statistics
   objects and targets, column storage and compression; `owner`: the old
   table's owner when the publishing role is not it), the foreign keys of
   other tables that reference it (`referenced`: no TRUNCATE or DROP can
   replace it), and both column lists (name, type and a collation other
   than the type's own, in order; a generated column of `old`, which no
   INSERT may fill, never matches). `old` and `new` are quoted relation
   names, bound as literals and resolved by the server (regclass). #}
WITH o AS (SELECT {{ p(old) }}::regclass::oid AS oid, (SELECT reltype FROM pg_class
                                                        WHERE oid = {{ p(old) }}::regclass) AS rowtype),
     n AS (SELECT {{ p(new) }}::regclass::oid AS oid)
SELECT
    ARRAY(
        SELECT * FROM (
            SELECT DISTINCT (SELECT CASE relkind WHEN 'm' THEN 'materialized view ' ELSE 'view ' END
                             FROM pg_class WHERE oid = r.ev_class) || r.ev_class::regclass::text
            FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid, o
            WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
              AND d.refobjid = o.oid AND r.ev_class <> o.oid
            UNION
            SELECT 'function ' || d.objid::regprocedure::text FROM pg_depend d, o
            WHERE d.classid = 'pg_proc'::regclass AND ((d.refclassid = 'pg_class'::regclass AND d.refobjid = o.oid)
                                                       OR (d.refclassid = 'pg_type'::regclass AND d.refobjid = o.rowtype))
            UNION
            SELECT 'table ' || d.objid::regclass::text || ' (a column of its row type)' FROM pg_depend d, o
            WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_type'::regclass
              AND d.refobjid = o.rowtype AND d.objid <> o.oid
        ) x ORDER BY 1
    ) AS views,
    {# each named as what it is: a primary key or unique constraint was called an index (helper-200) #}
    ARRAY(SELECT CASE con.contype WHEN 'p' THEN 'primary key ' WHEN 'u' THEN 'unique constraint ' ELSE 'index ' END
                 || i.indexrelid::regclass::text
          FROM pg_index i JOIN o ON i.indrelid = o.oid
          LEFT JOIN pg_constraint con
            ON con.conindid = i.indexrelid AND con.conrelid = o.oid AND con.contype IN ('p', 'u')
          ORDER BY i.indexrelid::regclass::text) AS indexes,
    ARRAY(
        SELECT 'row-level security' FROM pg_class c, o WHERE c.oid = o.oid AND (c.relrowsecurity OR c.relforcerowsecurity)
        UNION ALL
        SELECT * FROM (SELECT format('policy %I', pol.polname) FROM pg_policy pol, o WHERE pol.polrelid = o.oid ORDER BY 1) x
        UNION ALL
        SELECT * FROM (SELECT format('trigger %I', t.tgname) FROM pg_trigger t, o
                       WHERE t.tgrelid = o.oid AND NOT t.tgisinternal ORDER BY 1) x
        UNION ALL
        SELECT * FROM (SELECT format('rule %I', r.rulename) FROM pg_rewrite r, o
                       WHERE r.ev_class = o.oid AND r.rulename <> '_RETURN' ORDER BY 1) x
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
                       JOIN pg_publication pub ON pub.oid = pr.prpubid, o WHERE pr.prrelid = o.oid
                       UNION  -- FOR ALL TABLES, FOR TABLES IN SCHEMA: a swap left their subscribers behind
                       SELECT format('publication %I', pt.pubname) FROM pg_publication_tables pt
                       JOIN pg_namespace ns ON ns.nspname = pt.schemaname
                       JOIN pg_class c ON c.relnamespace = ns.oid AND c.relname = pt.tablename, o
                       WHERE c.oid = o.oid ORDER BY 1) x
    ) AS attached,
    (SELECT CASE WHEN c.relowner <> (SELECT relowner FROM pg_class WHERE oid = n.oid)
                 THEN format('owner %I', pg_get_userbyid(c.relowner)) END
     FROM pg_class c, o, n WHERE c.oid = o.oid) AS owner,
    ARRAY(
        SELECT * FROM (
            SELECT format(CASE WHEN a.attidentity <> '' THEN 'the identity (and NOT NULL) of %I'
                               WHEN a.attnotnull THEN 'NOT NULL on %I' ELSE 'the default of %I' END, a.attname)
            FROM pg_attribute a, o
            WHERE a.attrelid = o.oid AND a.attnum > 0 AND NOT a.attisdropped
              AND (a.attnotnull OR a.atthasdef OR a.attidentity <> '')
            ORDER BY a.attnum
        ) x
        UNION ALL
        SELECT format('tablespace %I', t.spcname) FROM pg_class c JOIN pg_tablespace t ON t.oid = c.reltablespace, o
        WHERE c.oid = o.oid
        UNION ALL
        SELECT 'storage options (' || array_to_string(c.reloptions, ', ') || ')' FROM pg_class c, o
        WHERE c.oid = o.oid AND c.reloptions IS NOT NULL
        UNION ALL
        SELECT 'replica identity ' || CASE c.relreplident WHEN 'f' THEN 'FULL' WHEN 'n' THEN 'NOTHING' ELSE 'USING INDEX' END
        FROM pg_class c, o WHERE c.oid = o.oid AND c.relreplident <> 'd'
        UNION ALL
        SELECT 'UNLOGGED' FROM pg_class c, o WHERE c.oid = o.oid AND c.relpersistence = 'u'
        UNION ALL
        SELECT * FROM (SELECT format('statistics %I', s.stxname) FROM pg_statistic_ext s, o
                       WHERE s.stxrelid = o.oid ORDER BY 1) x
        UNION ALL
        SELECT * FROM (
            SELECT format('the %s of %I', w.what, a.attname)
            FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid, o,
                 LATERAL (VALUES ('statistics target', a.attstattarget >= 0),  -- PostgreSQL 17: NULL by default
                                 ('storage', a.attstorage <> t.typstorage),
                                 ('compression', a.attcompression <> '')) w(what, set)
            WHERE a.attrelid = o.oid AND a.attnum > 0 AND NOT a.attisdropped AND w.set
            ORDER BY a.attnum, 1
        ) x
    ) AS unkept,
    ARRAY(
        SELECT format('the foreign key %I of %s', con.conname, con.conrelid::regclass::text)
        FROM pg_constraint con, o WHERE con.confrelid = o.oid AND con.conrelid <> o.oid
          AND con.conparentid = 0 ORDER BY 1  -- not a partition's copy of the table's own
    ) AS referenced,
    ARRAY(
        SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ({% include "_collation.sql" %})
               || CASE WHEN a.attgenerated <> '' THEN ' generated' ELSE '' END
        FROM pg_attribute a, o WHERE a.attrelid = o.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
    ) AS old_columns,
    ARRAY(
        SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ({% include "_collation.sql" %})
        FROM pg_attribute a, n WHERE a.attrelid = n.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
    ) AS new_columns,
    ARRAY(SELECT a.attname FROM pg_attribute a, o WHERE a.attrelid = o.oid AND a.attnum > 0 AND NOT a.attisdropped
          ORDER BY a.attnum) AS old_names,
    ARRAY(SELECT a.attname FROM pg_attribute a, n WHERE a.attrelid = n.oid AND a.attnum > 0 AND NOT a.attisdropped
          ORDER BY a.attnum) AS new_names
