{# The views reading `relation` reads (itself too, and through a function's
   SQL-standard body; not below a materialized view, whose rows are
   stored) that use a function of the moment (now(), current_date, a
   one-argument age()...) or a volatile one (random(), nextval()), and the
   user's functions they reach that are volatile or whose definition uses
   one of those, with what they use: each of the run's sessions evaluates
   it at its own time (one snapshot pins the rows, not the clock), so a
   row whose value crosses a cut between two fragments' reads is read by
   both or by neither (helper-43). Definitions are searched without their
   string literals and quoted names ('now' is a word; "t'x" no quote), a
   function by its call (a column named now is none), and the patterns
   hold no backslash (standard_conforming_strings may be off: helper-44).
   The row-level security policies that limit what the role reads of those
   relations too (a policy USING (random() < 0.9), or an embargo's
   visible_from <= now(): each fragment saw other rows; helper-91). #}
WITH RECURSIVE {% include "_reads.sql" %}, texts(what, volatile, body) AS (
    SELECT c.oid::regclass::text, false, pg_get_viewdef(c.oid)
    FROM reads r JOIN pg_class c ON c.oid = r.oid AND c.relkind = 'v'
    WHERE r.cls = 'pg_class'::regclass
    UNION ALL
    SELECT p.oid::regproc::text || '()', p.provolatile = 'v', pg_get_functiondef(p.oid)
    FROM reads r JOIN pg_proc p ON p.oid = r.oid AND p.prokind = 'f'
    WHERE r.cls = 'pg_proc'::regclass
    UNION ALL
    SELECT format('policy %I on %s', pol.polname, pol.polrelid::regclass), false, pg_get_expr(pol.polqual, pol.polrelid)
    FROM reads r JOIN pg_policy pol ON pol.polrelid = r.oid
    WHERE r.cls = 'pg_class'::regclass AND pol.polqual IS NOT NULL AND pol.polcmd IN ('r', '*')
      AND row_security_active(pol.polrelid)
      AND (0 = ANY (pol.polroles) OR EXISTS (SELECT 1 FROM unnest(pol.polroles) g WHERE pg_has_role(g, 'USAGE')))
)
SELECT t.what, coalesce(regexp_replace(m[1], '[[:space:]]*[(]$', '()'), 'a volatile function')
FROM texts t,
LATERAL regexp_match(
    regexp_replace(lower(t.body), '''([^'']|'''')*''|"([^"]|"")*"', '', 'g'),
    '([[:<:]](?:current_date|current_time|current_timestamp|localtime|localtimestamp)[[:>:]]|[[:<:]](?:now|transaction_timestamp|statement_timestamp|clock_timestamp|timeofday|random|gen_random_uuid|nextval)[[:space:]]*[(]|[[:<:]]age[[:space:]]*[(](?:[^,()]|[(][^()]*[)])*[)])') m
WHERE m IS NOT NULL OR t.volatile
ORDER BY 1, 2
