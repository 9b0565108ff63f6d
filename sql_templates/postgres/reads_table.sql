{# Whether replacing `table` replaces rows that reading `relation` reads
   (warehouse.reads_table): `table` is among what it reads (_reads.sql) or
   a parent of it; and the functions it calls whose reads the server does
   not record (`opaque`: PL/pgSQL, a SQL body written as a string). #}
WITH RECURSIVE {% include "_reads.sql" %}, above(oid) AS (
    SELECT oid FROM reads WHERE cls = 'pg_class'::regclass
    UNION
    SELECT i.inhparent FROM above a JOIN pg_inherits i ON i.inhrelid = a.oid
)
SELECT to_regclass({{ p(table) }})::oid IN (SELECT oid FROM above WHERE oid IS NOT NULL),
       ARRAY(SELECT p.oid::regprocedure::text FROM reads r JOIN pg_proc p ON p.oid = r.oid
             JOIN pg_language l ON l.oid = p.prolang
             WHERE r.cls = 'pg_proc'::regclass AND l.lanname NOT IN ('internal', 'c')
               AND p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
               AND {% if sql_bodies %}p.prosqlbody IS NULL{% else %}TRUE{% endif %}
             ORDER BY 1)
