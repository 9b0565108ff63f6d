{# The views reading `relation` reads (itself too; not below a materialized
   view, whose rows are stored) that use a function of the moment (now(),
   current_date, a one-argument age()...), a volatile one (random(),
   nextval()) or a volatile function of the user's, with what they use:
   each of the run's sessions evaluates it at its own time (one snapshot
   pins the rows, not the clock), so a row whose value crosses a cut
   between two fragments' reads is read by both or by neither (helper-43).
   The definition is searched without its string literals and quoted
   names ('now' is a word; "t'x" no quote), and the patterns hold no
   backslash (standard_conforming_strings may be off: helper-44). #}
WITH RECURSIVE views(oid) AS (
    SELECT c.oid FROM pg_class c WHERE c.oid = to_regclass({{ p(relation) }}) AND c.relkind = 'v'
    UNION
    SELECT c.oid FROM views v
    JOIN pg_rewrite w ON w.ev_class = v.oid
    JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid AND d.refclassid = 'pg_class'::regclass
    JOIN pg_class c ON c.oid = d.refobjid AND c.relkind = 'v'
)
SELECT v.oid::regclass::text, m[1]
FROM views v,
LATERAL regexp_match(
    regexp_replace(lower(pg_get_viewdef(v.oid)), '''([^'']|'''')*''|"([^"]|"")*"', '', 'g'),
    '([[:<:]](?:now|current_date|current_time|current_timestamp|localtime|localtimestamp|transaction_timestamp|statement_timestamp|clock_timestamp|timeofday|random|gen_random_uuid|nextval)[[:>:]]|[[:<:]]age[[:space:]]*[(](?:[^,()]|[(][^()]*[)])*[)])') m
WHERE m IS NOT NULL
UNION ALL
SELECT v.oid::regclass::text, p.oid::regproc::text || '()'
FROM views v
JOIN pg_rewrite w ON w.ev_class = v.oid
JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid AND d.refclassid = 'pg_proc'::regclass
JOIN pg_proc p ON p.oid = d.refobjid AND p.provolatile = 'v'
ORDER BY 1, 2
