{# `relation` with its text columns `columns` compared byte by byte
   (COLLATE "binary"), as the readers of a table compare its values: a DuckDB
   column declared COLLATE NOCASE grouped 'PARIS' and 'Paris' into one class
   where every reader sees two. PostgreSQL has no SELECT * REPLACE: there the
   `keep` columns, `columns` among them as the text a reader gets (the type's
   output: a bpchar's trailing blanks, which its equality and a cast to text
   leave out) under "C" (a citext, a case-insensitive collation, a domain
   over either). On DuckDB the `texts` among `columns` are compared as their
   text: an INTERVAL's '1 month' and '30 days', equal to DuckDB, two to its
   readers. #}
{% if dialect == "postgres" %}
(SELECT {% for c in keep %}{% if c in columns %}CASE WHEN {{ c | ident }} IS NOT NULL THEN concat({{ c | ident }}) END COLLATE "C" AS {% endif %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %} FROM {{ relation }}) AS "__sqlanon_bytewise"
{% else %}
(SELECT * REPLACE ({% for c in columns %}{% if c in texts | default([]) %}CAST({{ c | ident }} AS VARCHAR){% else %}{{ c | ident }}{% endif %} COLLATE "binary" AS {{ c | ident }}{{ ", " if not loop.last }}{% endfor %}) FROM {{ relation }})
{% endif %}
