{# Whether replacing `table` replaces rows that reading `relation` reads
   (warehouse.reads_table): `table` is among what it reads (_reads.sql) or
   a parent of it; and the functions it calls whose reads the server does
   not record (`opaque`: PL/pgSQL, a SQL body written as a string).
   `table` (schema, name) is looked up in the catalog, not by to_regclass,
   which fails where the role may not use its schema (a reader's role, the
   target's schema the writer's alone). #}
WITH RECURSIVE {% include "_reads.sql" %}, above(oid) AS (
    SELECT oid FROM reads WHERE cls = 'pg_class'::regclass
    UNION
    SELECT i.inhparent FROM above a JOIN pg_inherits i ON i.inhrelid = a.oid
)
SELECT (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = {{ p(table[0]) }} AND c.relname = {{ p(table[1]) }})
       IN (SELECT oid FROM above WHERE oid IS NOT NULL),
       ARRAY(SELECT p.oid::regprocedure::text FROM reads r JOIN pg_proc p ON p.oid = r.oid
             JOIN pg_language l ON l.oid = p.prolang
             WHERE r.cls = 'pg_proc'::regclass AND l.lanname NOT IN ('internal', 'c')
               AND p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
               AND {% if sql_bodies %}p.prosqlbody IS NULL{% else %}TRUE{% endif %}
             ORDER BY 1)
