{# The distinct non-NULL values of `column` (a hierarchy's or a prefix's domain);
   text by its bytes, as in domain_stats.sql (on PostgreSQL as ::text: a
   uuid, enum or inet has no collation, and DuckDB reads it as text; on
   MySQL and MariaDB one value per group of equal bytes). #}
{% if text and dialect.startswith(("sqla:mysql", "sqla:mariadb")) %}
SELECT min({{ column | ident }}) AS {{ column | ident }}
FROM {{ relation }} WHERE {{ column | ident }} IS NOT NULL
GROUP BY CAST({{ column | ident }} AS BINARY)
{% else %}
SELECT DISTINCT {{ column | ident }}{% if text and dialect == "postgres" %}::text COLLATE "C"{% elif text and dialect == "sqla:sqlite" %} COLLATE BINARY{% endif %} AS {{ column | ident }}
FROM {{ relation }} WHERE {{ column | ident }} IS NOT NULL
{% endif %}
