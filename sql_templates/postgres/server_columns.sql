{# Name and server type of every column of `relation`, in order
   (format_type). A domain, at any depth (a domain over a domain), whose base
   type is numeric, time with time zone, interval, real or double precision,
   or an array of one, is reported as that base type (with the innermost type
   modifier): DuckDB reads it as it reads the base type (a numeric as a double
   when unconstrained, a timetz without its offset, a float as a float), so
   the checks by type name must see the base type; a numeric is then pulled
   as text, a float as a float (its NaN, like a float column's, is no value
   of a sensitive column's l). The third column, `declared`, is the column's own
   type, the domain's name: a table created with it keeps the domain and its
   constraint. The fourth, `base`, is every domain's base type, at any depth
   and as the element of an array (a `d[]` as `integer[]`): a table in another
   database is created with it, where a domain of that name may be another
   type. The fifth, `readable`: whether the role may read it (a column
   grant may leave some out). A collation other than the type's own follows each type
   (_collation.sql), so a table created with these types compares and
   groups values as the source does. #}
SELECT
    a.attname,
    coalesce((
        WITH RECURSIVE chain(base, typmod, depth) AS (
            SELECT t.typbasetype, t.typtypmod, 0 FROM pg_type t WHERE t.oid = a.atttypid AND t.typtype = 'd'
            UNION ALL
            SELECT d.typbasetype, CASE WHEN chain.typmod >= 0 THEN chain.typmod ELSE d.typtypmod END, chain.depth + 1
            FROM chain JOIN pg_type d ON d.oid = chain.base AND d.typtype = 'd'
        )
        SELECT format_type(base, typmod) FROM chain JOIN pg_type b ON b.oid = chain.base
        WHERE (CASE WHEN b.typcategory = 'A' THEN b.typelem ELSE b.oid END)
            IN ('numeric'::regtype, 'timetz'::regtype, 'interval'::regtype, 'float4'::regtype, 'float8'::regtype)
        ORDER BY depth DESC LIMIT 1
    ), format_type(a.atttypid, a.atttypmod))
    || ({% include "_collation.sql" %}) AS type,
    format_type(a.atttypid, a.atttypmod) || ({% include "_collation.sql" %}) AS declared,
    coalesce((
        WITH RECURSIVE chain(base, typmod, depth) AS (
            SELECT t.typbasetype, t.typtypmod, 0 FROM pg_type t
            WHERE t.oid = CASE WHEN own.typcategory = 'A' AND own.typelem <> 0 THEN own.typelem ELSE own.oid END
                AND t.typtype = 'd'
            UNION ALL
            SELECT d.typbasetype, CASE WHEN chain.typmod >= 0 THEN chain.typmod ELSE d.typtypmod END, chain.depth + 1
            FROM chain JOIN pg_type d ON d.oid = chain.base AND d.typtype = 'd'
        ), base AS (
            SELECT b.oid, chain.typmod FROM chain JOIN pg_type e ON e.oid = chain.base AND e.typtype <> 'd'
            JOIN pg_type b
                ON b.oid = CASE WHEN own.typcategory = 'A' AND own.typelem <> 0 THEN e.typarray ELSE e.oid END
        )
        SELECT format_type(base.oid, base.typmod)
            || CASE WHEN a.attcollation <> b.typcollation THEN ' COLLATE ' || a.attcollation::regcollation::text
                ELSE '' END
        FROM base JOIN pg_type b ON b.oid = base.oid
    ), format_type(a.atttypid, a.atttypmod) || ({% include "_collation.sql" %})) AS base,
    has_column_privilege(a.attrelid, a.attnum, 'SELECT') AS readable
FROM pg_attribute a JOIN pg_type own ON own.oid = a.atttypid
WHERE a.attrelid = to_regclass({{ p(relation) }}) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
