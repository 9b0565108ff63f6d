{# For the text sensitive columns `loose` of `relation`, grouped by the QIs:
   how many classes hold fewer than `l` distinct values once case, blanks
   around a value, zero-width characters and (DuckDB) the Unicode form are
   ignored (`c<i>`: 'HIV' and 'HIV ', a composed and a decomposed 'é', one
   diagnosis to a reader), and two such values of one of them (`e<i>`, the
   smallest and largest). A NULL counts as one value, as in _classes.sql. #}
{% set keys %}{% for c in qi %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}{% endset %}
WITH "__sqlanon_loose" AS (
    SELECT 1 AS "__sqlanon_one"
{% for s in loose %}
{% if dialect == "postgres" %}
        , count(DISTINCT lower(btrim(regexp_replace(CAST({{ s | ident }} AS text), '[\u200B-\u200D\u2060\uFEFF]', '', 'g')))) + max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("n" ~ loop.index0) | ident }}
{% else %}
        , count(DISTINCT lower(trim(regexp_replace(nfc_normalize({{ s | ident }}), '[\x{200B}-\x{200D}\x{2060}\x{FEFF}]', '', 'g')))) + max(CASE WHEN {{ s | ident }} IS NULL THEN 1 ELSE 0 END) AS {{ ("n" ~ loop.index0) | ident }}
{% endif %}
        , min({{ s | ident }}) AS {{ ("lo" ~ loop.index0) | ident }}, max({{ s | ident }}) AS {{ ("hi" ~ loop.index0) | ident }}
{% endfor %}
    FROM {{ relation }}
    GROUP BY {{ keys }}
)
SELECT count(*) AS "n"
{% for s in loose %}
    , count(*) FILTER (WHERE {{ ("n" ~ loop.index0) | ident }} < {{ p(l) }}) AS {{ ("c" ~ loop.index0) | ident }}
    , min(CASE WHEN {{ ("n" ~ loop.index0) | ident }} < {{ p(l) }} THEN ARRAY[{{ ("lo" ~ loop.index0) | ident }}, {{ ("hi" ~ loop.index0) | ident }}] END) AS {{ ("e" ~ loop.index0) | ident }}
{% endfor %}
FROM "__sqlanon_loose"
