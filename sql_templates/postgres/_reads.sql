{# A recursive CTE `reads(cls, oid)`: what reading `relation` reads, at any
   depth: the relations and functions a view's rules depend on, a table's
   inheritance children and partitions, and what a function's SQL-standard
   body reads (pg_class and pg_proc rows). Follows `WITH RECURSIVE`.
   `past_stored`: on below a materialized view too (what refreshing it
   reads), or stop there (what reading its stored rows evaluates). #}
reads(cls, oid) AS (
    SELECT 'pg_class'::regclass, to_regclass({{ p(relation) }})::oid
    UNION
    SELECT x.cls, x.oid FROM reads r, LATERAL (
        SELECT d.refclassid::regclass AS cls, d.refobjid AS oid FROM pg_rewrite w JOIN pg_depend d
            ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
           AND d.refclassid IN ('pg_class'::regclass, 'pg_proc'::regclass)
        {% if not past_stored %}JOIN pg_class v ON v.oid = w.ev_class AND v.relkind <> 'm'{% endif %}
        WHERE r.cls = 'pg_class'::regclass AND w.ev_class = r.oid
        UNION ALL
        SELECT 'pg_class'::regclass, i.inhrelid FROM pg_inherits i
        WHERE r.cls = 'pg_class'::regclass AND i.inhparent = r.oid
        UNION ALL  -- what a function's SQL-standard body reads
        SELECT d.refclassid::regclass, d.refobjid FROM pg_depend d
        WHERE r.cls = 'pg_proc'::regclass AND d.classid = 'pg_proc'::regclass AND d.objid = r.oid
          AND d.refclassid IN ('pg_class'::regclass, 'pg_proc'::regclass)) x
)
