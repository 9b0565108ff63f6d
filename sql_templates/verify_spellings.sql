{# For the text sensitive column `s` of `relation`, grouped by the QIs: how
   many classes hold fewer than `l` distinct values once case, blanks
   around a value, zero-width and control characters (a NUL, which readers
   of C strings stop at: helper-199) and (DuckDB) the Unicode form are
   ignored (`c`: 'HIV' and 'HIV ', a composed and a decomposed 'é', one
   diagnosis to a reader), and two values of one of them that are one so
   (`e`). A NULL counts as one value, as in _classes.sql; values are
   compared as their text (a citext's 'HIV' and 'hiv' too). #}
{% set keys %}{% for c in qi %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}{% endset %}
WITH "__sqlanon_spelt" AS (
    SELECT {{ keys }}, count(DISTINCT CAST({{ s | ident }} AS {% if dialect == "postgres" %}text{% else %}VARCHAR{% endif %})) AS "d",
           min(CAST({{ s | ident }} AS {% if dialect == "postgres" %}text{% else %}VARCHAR{% endif %})) AS "lo",
           max(CAST({{ s | ident }} AS {% if dialect == "postgres" %}text{% else %}VARCHAR{% endif %})) AS "hi"
    FROM {{ relation }}
{% if dialect == "postgres" %}
    GROUP BY {{ keys }}, lower(btrim(regexp_replace(CAST({{ s | ident }} AS text), E'[\\x01-\\x1F\\x7F\\u200B-\\u200D\\u2060\\uFEFF]', '', 'g')))
{% else %}
    GROUP BY {{ keys }}, lower(trim(regexp_replace(nfc_normalize({{ s | ident }}), '[\x{0}-\x{1F}\x{7F}\x{200B}-\x{200D}\x{2060}\x{FEFF}]', '', 'g')))
{% endif %}
), "__sqlanon_loose" AS (
    SELECT count(*) AS "n", min(CASE WHEN "d" > 1 THEN ARRAY["lo", "hi"] END) AS "e"
    FROM "__sqlanon_spelt"
    GROUP BY {{ keys }}
)
SELECT count(*) FILTER (WHERE "n" < {{ p(l) }}) AS "c", min("e") FILTER (WHERE "n" < {{ p(l) }}) AS "e"
FROM "__sqlanon_loose"
