{# The WHERE condition of one fragment (sqlanon.fragmentation.where_sql), on
   one line: the conjunction of its cut predicates, each one side of a cut.
   Columns enter only through ident and values only through p(), so a value
   such as x'); DROP TABLE t; -- is a bound parameter, never SQL text. Every
   disjunction is parenthesized, and so is a conjunction of two or more
   predicates, so the result can be embedded in a larger condition. The ops
   are the closed set sqlanon.fragmentation.OPS, checked before rendering.
   A NaN is above every number, so the side above a (non-NaN) float cut holds
   it; DuckDB 1.4 still skips the Parquet row groups whose statistics (which
   leave NaN out) say nothing is above the cut: `OR isnan()` keeps them read.
   Where its own reads do not tell DuckDB that the statistics may leave NaN
   out (`can_have_nan`: a table's view of a pyarrow-written file), it took
   the side below the cut for true of every row of such a row group, NaN
   too, which then landed in both fragments (helper-178): `AND NOT isnan()`.
   (`v == v` is false for a NaN only.) So is a NaN among a hierarchy cut's
   leaves: `IN (…, NaN)` skipped the row groups holding NaN rows, which the
   other side's `NOT IN` leaves out, and they landed in no fragment. A long
   list of a hierarchy cut's leaves is bound as one list on DuckDB (`IN
   (SELECT unnest(?))`, a hash join): DuckDB evaluates `NOT IN (v1, …, vn)`
   as n comparisons per row, and
   a cut of a 50,000-leaf hierarchy took a fragment's read 100 s per 1M rows.
   The join does not match a NaN leaf, as `IN (…)` does: a float list is
   bound without it, and a NaN leaf is `isnan()` (a float hierarchy's cuts
   were long `IN (…)` lists, and a run 40-140 times slower than the same
   values as integers: helper-34). SQLite keeps timestamps as text and
   compares them as text: '2020-01-07T05:00' sorted above a cut at
   '2020-01-07 14:00', and a cut day's rows went to the fragment above the
   one the plan counted them in (helper-144). A timestamp cut there compares
   the row's text with ' ' for 'T' (as domain_stats.sql reads min and max)
   with the cut's text to the microsecond (stamp_text); beside it, a looser
   test of the column as it is (against the 'T' spelling for `<=`), which an
   index on the column serves: each fragment read the whole table without.
   A hierarchy's leaves (`in`) are matched against the row's text written
   out to the microsecond, ' ' for 'T' (a row spelled '…T05:00' or
   '… 05:00:00.000000' matched no leaf, and went to the last fragment);
   SQLAlchemy's text() takes ':00' for a parameter, whence '\:'. #}
{% if not predicates %}
TRUE
{% else %}
{% if predicates | length > 1 %}({% endif %}
{%- for pr in predicates -%}
{%- if not loop.first %} AND {% endif -%}
{%- if pr is sqlite_stamp_cut and pr.op == "le" -%}
({{ pr.column | ident }} <= {{ p(pr.value | stamp_t) }} AND replace({{ pr.column | ident }}, 'T', ' ') <= {{ p(pr.value | stamp_text) }})
{%- elif pr is sqlite_stamp_cut and pr.op == "gt_or_null" -%}
(({{ pr.column | ident }} > {{ p(pr.value | stamp_text) }} AND replace({{ pr.column | ident }}, 'T', ' ') > {{ p(pr.value | stamp_text) }}) OR {{ pr.column | ident }} IS NULL)
{%- elif pr is sqlite_stamp_cut and pr.op == "gt" -%}
({{ pr.column | ident }} > {{ p(pr.value | stamp_text) }} AND replace({{ pr.column | ident }}, 'T', ' ') > {{ p(pr.value | stamp_text) }})
{%- elif pr is sqlite_stamp_cut and pr.op == "le_any" -%}
({% for v in pr.value %}({{ pr.column | ident }} <= {{ p(v | stamp_t) }} AND replace({{ pr.column | ident }}, 'T', ' ') <= {{ p(v | stamp_text) }}){% if not loop.last %} OR {% endif %}{% endfor %})
{%- elif pr is sqlite_stamp_cut and pr.op in ("in", "not_in_or_null") -%}
{% if pr.op == "not_in_or_null" %}({% endif %}(substr({{ pr.column | ident }}, 1, 10) || ' ' || substr(substr({{ pr.column | ident }}, 12) || CASE length({{ pr.column | ident }}) WHEN 10 THEN '00\:00\:00.' WHEN 13 THEN '\:00\:00.' WHEN 16 THEN '\:00.' WHEN 19 THEN '.' ELSE '' END || '000000', 1, 15)){% if pr.op == "not_in_or_null" %} NOT{% endif %} IN ({% for v in pr.value %}{{ p(v | stamp_text) }}{{ ", " if not loop.last }}{% endfor %}){% if pr.op == "not_in_or_null" %} OR {{ pr.column | ident }} IS NULL){% endif %}
{%- elif pr.op == "le" and dialect == "duckdb" and pr.value is float and pr.value == pr.value -%}
({{ pr.column | ident }} <= {{ p(pr.value) }} AND NOT isnan({{ pr.column | ident }}))
{%- elif pr.op == "le" -%}
{{ pr.column | ident }} <= {{ p(pr.value) }}
{%- elif pr.op == "gt_or_null" -%}
({{ pr.column | ident }} > {{ p(pr.value) }} OR {{ pr.column | ident }} IS NULL
{%- if dialect == "duckdb" and pr.value is float and pr.value == pr.value %} OR isnan({{ pr.column | ident }}){% endif %})
{%- elif pr.op == "gt" and dialect == "duckdb" and pr.value is float and pr.value == pr.value -%}
({{ pr.column | ident }} > {{ p(pr.value) }} OR isnan({{ pr.column | ident }}))
{%- elif pr.op == "gt" -%}
{{ pr.column | ident }} > {{ p(pr.value) }}
{%- elif pr.op == "le_any" -%}
({% for v in pr.value %}{{ pr.column | ident }} <= {{ p(v) }}{% if not loop.last %} OR {% endif %}{% endfor %})
{%- elif pr.op == "in" and dialect == "duckdb" and pr.value | length > 64 -%}
{%- for v in pr.value if v is float and v != v %}({% endfor -%}
{{ pr.column | ident }} IN (SELECT unnest({{ p(pr.value | without_nan) }}))
{%- for v in pr.value if v is float and v != v %} OR isnan({{ pr.column | ident }})){% endfor %}
{%- elif pr.op == "in" and pr.value -%}
{%- for v in pr.value if dialect == "duckdb" and v is float and v != v %}({% endfor -%}
{{ pr.column | ident }} IN ({% for v in pr.value %}{{ p(v) }}{{ ", " if not loop.last }}{% endfor %})
{%- for v in pr.value if dialect == "duckdb" and v is float and v != v %} OR isnan({{ pr.column | ident }})){% endfor %}
{%- elif pr.op == "in" -%}
FALSE
{%- elif pr.op == "not_in_or_null" and dialect == "duckdb" and pr.value | length > 64 -%}
(({{ pr.column | ident }} NOT IN (SELECT unnest({{ p(pr.value | without_nan) }}))
{%- for v in pr.value if v is float and v != v %} AND NOT isnan({{ pr.column | ident }}){% endfor %}) OR {{ pr.column | ident }} IS NULL)
{%- elif pr.op == "not_in_or_null" and pr.value -%}
({{ pr.column | ident }} NOT IN ({% for v in pr.value %}{{ p(v) }}{{ ", " if not loop.last }}{% endfor %}) OR {{ pr.column | ident }} IS NULL)
{%- elif pr.op == "not_in_or_null" -%}
TRUE
{%- elif pr.op == "is_null" -%}
{{ pr.column | ident }} IS NULL
{%- elif pr.op == "not_null" -%}
{{ pr.column | ident }} IS NOT NULL
{%- endif -%}
{%- endfor -%}
{%- if predicates | length > 1 %}){% endif %}

{% endif %}
