{# `relation` with its text columns `columns` compared byte by byte
   (COLLATE "binary"), as the readers of a table compare its values: a DuckDB
   column declared COLLATE NOCASE grouped 'PARIS' and 'Paris' into one class
   where every reader sees two. #}
(SELECT * REPLACE ({% for c in columns %}{{ c | ident }} COLLATE "binary" AS {{ c | ident }}{{ ", " if not loop.last }}{% endfor %}) FROM {{ relation }})
