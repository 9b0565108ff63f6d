{# Dataset-wide statistics in one statement: rows; per QI the NULL count
   and either min/max (interval columns: their span is all Mondrian needs;
   the max of a `floats` column leaves NaN out, which sorts after every
   number, as the engine places NaN at the largest number) or the distinct
   count (other columns; and the min of a `nan_sets` float column, NaN only
   where every value is); per sensitive column the distinct count, a NULL
   counting as one. PostgreSQL computes count(DISTINCT …) by
   sorting (slow on text under a linguistic collation), so there each
   distinct count is a hash GROUP BY in a scalar subquery of the same
   statement (same snapshot; GROUP BY puts the NULLs in one group).
   Text (`texts`) is counted by its bytes, as the engine counts it, whatever
   the column's collation (a case-insensitive one would count 'a' and 'A'
   as one value: NCP above 1, and an l the data has refused); DuckDB counts
   distinct values that way anyway; MySQL and MariaDB count them as BINARY.
   A PostgreSQL sensitive column in `loose` (an unconstrained numeric, a
   citext, a column with a collation) is counted both ways: by its text and
   by the server's equality (`e`), which may make '1.0' and '1.00', or 'Flu'
   and 'flu', one value (a `jsonb` column, a json, which has none: as the
   type it maps to, jsonb or jsonb[]); so is a DuckDB table's text sensitive
   column, whose GROUP BY follows its collation (NOCASE) where
   count(DISTINCT …) does not.
   PostgreSQL's min/max of a numeric(p,s) column (`decimals`: (p, s)) is
   an unconstrained numeric, which DuckDB reads as a double: cast back.
   SQLite keeps timestamps as text, where '2021-01-01T06:00' sorts after
   '2021-01-01 12:00': their min/max (`stamps`) compare one form, with ' '
   for 'T' (strftime() cut them to milliseconds, and made '2021-01-01 05' NULL).
   Whether each PostgreSQL timestamp column of `far` (name, with a zone)
   holds a time past DuckDB's last one, 294247-01-10 04:00:54.775806
   (PostgreSQL's go to 294276), which DuckDB's postgres extension reads
   wrapped around to a time 290,000 years BC.
   Whether each `nul` text column (DuckDB, SQLite) holds a NUL byte
   (`nul_cast`: a list, map, array or enum, searched as its text; SQLite's text
   functions stop at one: its bytes are searched).
   The checksums (_checksum.sql) of the `checksum` columns, and whether each
   `signed_zeros` column holds both zeros (_signed_zeros.sql), and the bytes
   of the `widths` columns' values (_widths.sql), in the same pass. #}
SELECT
    count(*) AS n_rows
{% for c in qi %}
    , count(*) - count({{ c | ident }}) AS {{ ("nulls" ~ loop.index0) | ident }}
{% if c in interval and c in stamps and dialect == "sqla:sqlite" %}
    , min(replace({{ c | ident }}, 'T', ' ')) AS {{ ("min" ~ loop.index0) | ident }}
    , max(replace({{ c | ident }}, 'T', ' ')) AS {{ ("max" ~ loop.index0) | ident }}
{% elif c in interval and c in decimals and dialect == "postgres" %}
    , CAST(min({{ c | ident }}) AS numeric({{ decimals[c][0] | lit }}, {{ decimals[c][1] | lit }})) AS {{ ("min" ~ loop.index0) | ident }}
    , CAST(max({{ c | ident }}) AS numeric({{ decimals[c][0] | lit }}, {{ decimals[c][1] | lit }})) AS {{ ("max" ~ loop.index0) | ident }}
{% elif c in interval %}
    , min({{ c | ident }}) AS {{ ("min" ~ loop.index0) | ident }}
{% if c in floats and dialect == "duckdb" %}
    , max(CASE WHEN NOT isnan({{ c | ident }}) THEN {{ c | ident }} END) AS {{ ("max" ~ loop.index0) | ident }}
{% elif c in floats and dialect == "postgres" %}
    , max(CASE WHEN {{ c | ident }} <> 'NaN' THEN {{ c | ident }} END) AS {{ ("max" ~ loop.index0) | ident }}
{% else %}
    , max({{ c | ident }}) AS {{ ("max" ~ loop.index0) | ident }}
{% endif %}
{% elif dialect == "postgres" %}
    , (SELECT count(*) FROM (SELECT 1 FROM {{ relation }} WHERE {{ c | ident }} IS NOT NULL GROUP BY {{ c | ident }}{% if c in texts %}::text COLLATE "C"{% endif %}) AS v) AS {{ ("d" ~ loop.index0) | ident }}
{% else %}
    , count(DISTINCT {% if c in texts and dialect.startswith(("sqla:mysql", "sqla:mariadb")) %}CAST({{ c | ident }} AS BINARY){% else %}{{ c | ident }}{% endif %}{% if c in texts and dialect == "sqla:sqlite" %} COLLATE BINARY{% endif %}) AS {{ ("d" ~ loop.index0) | ident }}
{% endif %}
{% if c in nan_sets %}
    , min({{ c | ident }}) AS {{ ("min" ~ loop.index0) | ident }}
{% endif %}
{% endfor %}
{% for s in sensitive %}
{% if dialect == "postgres" %}
    , (SELECT count(*) FROM (SELECT 1 FROM {{ relation }} GROUP BY {{ s | ident }}{% if s in texts or s in loose %}::text COLLATE "C"{% endif %}) AS v) AS {{ ("s" ~ loop.index0) | ident }}
{% if s in loose %}
    , (SELECT count(*) FROM (SELECT 1 FROM {{ relation }} GROUP BY {{ s | ident }}{% if s in jsonb %}::jsonb{% if jsonb[s] == "jsonb[]" %}[]{% endif %}{% endif %}) AS v) AS {{ ("e" ~ loop.index0) | ident }}
{% endif %}
{% else %}
    , count(DISTINCT {% if s in texts and dialect.startswith(("sqla:mysql", "sqla:mariadb")) %}CAST({{ s | ident }} AS BINARY){% else %}{{ s | ident }}{% endif %}{% if s in texts and dialect == "sqla:sqlite" %} COLLATE BINARY{% endif %}) + max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("s" ~ loop.index0) | ident }}
{% if s in loose %}
    , (SELECT count(*) FROM (SELECT 1 FROM {{ relation }} GROUP BY {{ s | ident }}) AS v) AS {{ ("e" ~ loop.index0) | ident }}
{% endif %}
{% endif %}
{% endfor %}
{% for c, zoned in far %}
    , bool_or(isfinite({{ c | ident }}) AND {{ c | ident }} > {{ ("294247-01-10 04:00:54.775806" ~ ("+00" if zoned else "")) | lit }})
        AS {{ ("__sqlanon_far" ~ loop.index0) | ident }}
{% endfor %}
{% for c in nul %}
{% if dialect == "sqla:sqlite" %}
    , max(instr(CAST({{ c | ident }} AS BLOB), x'00') > 0) AS {{ ("__sqlanon_nul" ~ loop.index0) | ident }}
{% else %}
    , bool_or(contains({% if c in nul_cast %}CAST({{ c | ident }} AS VARCHAR){% else %}{{ c | ident }}{% endif %}, chr(0))) AS {{ ("__sqlanon_nul" ~ loop.index0) | ident }}
{% endif %}
{% endfor %}
{% include "_checksum.sql" %}
{% include "_signed_zeros.sql" %}
{% include "_widths.sql" %}
FROM {{ relation }}
