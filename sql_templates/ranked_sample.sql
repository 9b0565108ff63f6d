{# The sample (sample.sql) with, per text QI of a table (`ranked`: pairs of
   the column and the name its ranks get), each row's rank in the database's
   own order of that column: 1 for its smallest value, values equal under the
   column's collation one rank, NULL after every value. The plan cuts in that
   order: a collation (NOCASE, ICU, a case-insensitive MySQL one) orders text
   otherwise than its bytes, and fragments cut by the bytes came out empty or
   of a few rows beside swollen ones. #}
{% if ranked %}
SELECT *{% for c, r in ranked %},
    dense_rank() OVER (ORDER BY CASE WHEN {{ c | ident }} IS NULL THEN 1 ELSE 0 END, {{ c | ident }}) AS {{ r | ident }}
{%- endfor %}

FROM (
{% include "sample.sql" %}

) {{ "__sqlanon_sampled" | ident }}
{% else %}
{% include "sample.sql" %}
{% endif %}
