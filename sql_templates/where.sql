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
   compares them as text: an ordering predicate (`ordered`, `order_value`)
   compares the column with ' ' for ISO's 'T' against the cut's text with
   every fraction digit (sqlanon.sql.render._sqlite_stamp); other databases
   take the column and the value as they are. #}
{% if not predicates %}
TRUE
{% else %}
{% if predicates | length > 1 %}({% endif %}
{%- for pr in predicates -%}
{%- if not loop.first %} AND {% endif -%}
{%- if pr.op == "le" -%}
{{ pr | ordered }} <= {{ p(pr.value | order_value) }}
{%- elif pr.op == "gt_or_null" -%}
({{ pr | ordered }} > {{ p(pr.value | order_value) }} OR {{ pr.column | ident }} IS NULL
{%- if dialect == "duckdb" and pr.value is float and pr.value == pr.value %} OR isnan({{ pr.column | ident }}){% endif %})
{%- elif pr.op == "gt" and dialect == "duckdb" and pr.value is float and pr.value == pr.value -%}
({{ pr.column | ident }} > {{ p(pr.value) }} OR isnan({{ pr.column | ident }}))
{%- elif pr.op == "gt" -%}
{{ pr | ordered }} > {{ p(pr.value | order_value) }}
{%- elif pr.op == "le_any" -%}
({% for v in pr.value %}{{ pr | ordered }} <= {{ p(v | order_value) }}{% if not loop.last %} OR {% endif %}{% endfor %})
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
