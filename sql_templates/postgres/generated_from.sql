{# Every generated column (stored, or virtual: PostgreSQL 18's default) of
   the tables reading `relation` reads (_reads.sql: itself, the tables below
   a view, a parent's children), with each column its expression reads
   (the pg_depend rows of its pg_attrdef expression): one that reads a QI
   and is published unchanged would give the QI's value away. By name, as
   a view passes the columns on (a DuckDB source's are matched so too);
   through a view, one generated from a QI was published raw (helper-43). #}
WITH RECURSIVE {% include "_reads.sql" %}
SELECT g.attname, r.attname
FROM pg_attribute g
JOIN pg_attrdef ad ON ad.adrelid = g.attrelid AND ad.adnum = g.attnum
JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
    AND d.refclassid = 'pg_class'::regclass AND d.refobjid = g.attrelid AND d.refobjsubid > 0
    AND d.refobjsubid <> g.attnum
JOIN pg_attribute r ON r.attrelid = g.attrelid AND r.attnum = d.refobjsubid
WHERE g.attrelid IN (SELECT oid FROM reads WHERE cls = 'pg_class'::regclass)
  AND g.attgenerated IN ('s', 'v') AND NOT g.attisdropped
ORDER BY g.attrelid, g.attnum, r.attnum
