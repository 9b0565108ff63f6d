{# The views reading `relation` reads (_reads.sql, itself too) whose
   definition calls a function of the moment (now(), current_date...) or a
   volatile one (random(), nextval()), with the first such name: each of
   the run's sessions evaluates it at its own time (one snapshot pins the
   rows, not the clock), so a row whose value crosses a cut between two
   fragments' reads is read by both or by neither (helper-43). #}
WITH RECURSIVE {% include "_reads.sql" %}
SELECT c.oid::regclass::text, m[1]
FROM reads r
JOIN pg_class c ON c.oid = r.oid AND c.relkind = 'v',
-- (its string literals left out: a WHERE note <> 'now' calls nothing)
LATERAL regexp_match(regexp_replace(lower(pg_get_viewdef(c.oid)), '''([^'']|'''')*''', '', 'g'),
    '\m(now|current_date|current_time|current_timestamp|localtime|localtimestamp|transaction_timestamp|statement_timestamp|clock_timestamp|timeofday|random|gen_random_uuid|nextval)\M') m
WHERE r.cls = 'pg_class'::regclass AND m IS NOT NULL
ORDER BY 1
