{# The foreign tables reading `relation` reads (itself, a partition, or below a
   view; not below a materialized view, whose rows are stored): the run's
   exported snapshot does not hold their rows, as each session reads them in
   a remote transaction of its own (helper-61). #}
WITH RECURSIVE {% include "_reads.sql" %}
SELECT DISTINCT c.oid::regclass::text
FROM reads r JOIN pg_class c ON c.oid = r.oid AND c.relkind = 'f'
WHERE r.cls = 'pg_class'::regclass
ORDER BY 1
