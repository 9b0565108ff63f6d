{# The distinct non-NULL values of `column` (a hierarchy's or a prefix's domain);
   text by its bytes, as in domain_stats.sql (on PostgreSQL as ::text: a
   uuid, enum or inet has no collation, and DuckDB reads it as text; on
   MySQL and MariaDB one value per group of equal bytes; on DuckDB COLLATE
   "binary": a NOCASE column's 'AB' and 'ab' are two published values, cast
   to VARCHAR first: a UUID or JSON column reaches Arrow as text, and a
   collation applies to VARCHAR only). A
   `float` column's -0.0 and 0.0 are equal but published as two texts: its
   values are told apart by their text too. #}
{% if text and dialect.startswith(("sqla:mysql", "sqla:mariadb")) %}
SELECT min({{ column | ident }}) AS {{ column | ident }}
FROM {{ relation }} WHERE {{ column | ident }} IS NOT NULL
GROUP BY CAST({{ column | ident }} AS BINARY)
{% else %}
SELECT DISTINCT {% if text and dialect == "duckdb" %}CAST({{ column | ident }} AS VARCHAR){% else %}{{ column | ident }}{% endif %}{% if text and dialect == "postgres" %}::text COLLATE "C"{% elif text and dialect == "sqla:sqlite" %} COLLATE BINARY{% elif text and dialect == "duckdb" %} COLLATE "binary"{% endif %} AS {{ column | ident }}
{%- if float and dialect in ("duckdb", "postgres") %}, CAST({{ column | ident }} AS VARCHAR) AS "__sqlanon_text"{% endif %}
FROM {{ relation }} WHERE {{ column | ident }} IS NOT NULL
{% endif %}
