{# `relation` with its text columns `columns` compared byte by byte
   (COLLATE "binary"), as the readers of a table compare its values: a DuckDB
   column declared COLLATE NOCASE grouped 'PARIS' and 'Paris' into one class
   where every reader sees two. PostgreSQL has no SELECT * REPLACE: there the
   `keep` columns, `columns` among them as text under "C" (a citext, a
   case-insensitive collation). #}
{% if dialect == "postgres" %}
(SELECT {% for c in keep %}{{ c | ident }}{% if c in columns %}::text COLLATE "C" AS {{ c | ident }}{% endif %}{{ ", " if not loop.last }}{% endfor %} FROM {{ relation }}) AS "__sqlanon_bytewise"
{% else %}
(SELECT * REPLACE ({% for c in columns %}{{ c | ident }} COLLATE "binary" AS {{ c | ident }}{{ ", " if not loop.last }}{% endfor %}) FROM {{ relation }})
{% endif %}
