{# The distinct non-NULL values of `column` (a hierarchy's or a prefix's domain);
   text by its bytes, as in domain_stats.sql (on PostgreSQL as ::text: a
   uuid, enum or inet has no collation, and DuckDB reads it as text). #}
SELECT DISTINCT {{ column | ident }}{% if text and dialect == "postgres" %}::text COLLATE "C"{% elif text and dialect == "sqla:sqlite" %} COLLATE BINARY{% endif %} AS {{ column | ident }}
FROM {{ relation }} WHERE {{ column | ident }} IS NOT NULL
