{# Order-independent checksums of the `checksum` columns, as text: the sum
   of a 64-bit hash of every value, one per column (`__sqlanon_h<i>`, its
   values as a multiset) and, with two or more columns, one over each row's
   values together (`__sqlanon_hrow`: catches values moved between rows).
   Equal sums on the input and the output say the values came through
   unchanged. Both engines hash the values' text form, so a column that only
   changes type on the way (an ENUM read back as VARCHAR) compares equal and
   a changed value does not (DuckDB prints floats exactly; its two sides
   run on the coordinator's one connection). PostgreSQL hashes under
   COLLATE "C" (bytes, whatever the collation), in sessions whose output
   settings are pinned (sqlanon.verify.CANONICAL_TEXT). With `native`
   (DuckDB, both sides of one type) the values are hashed as they are,
   not as text: twice as fast. Included after the first item of a SELECT
   list. #}
{% for c in checksum %}
{% if dialect == "postgres" %}
    , sum(hashtextextended(({{ c | ident }})::text COLLATE "C", 0))::text AS {{ ("__sqlanon_h" ~ loop.index0) | ident }}
{% else %}
    , CAST(sum(hash({% if native | default(false) %}{{ c | ident }}{% else %}CAST({{ c | ident }} AS VARCHAR){% endif %})) AS VARCHAR) AS {{ ("__sqlanon_h" ~ loop.index0) | ident }}
{% endif %}
{% endfor %}
{% if checksum | length > 1 %}
{% if dialect == "postgres" %}
    , sum(hashtextextended(ROW({% for c in checksum %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %})::text COLLATE "C", 0))::text AS "__sqlanon_hrow"
{% else %}
    , CAST(sum(hash({% for c in checksum %}{% if native | default(false) %}{{ c | ident }}{% else %}CAST({{ c | ident }} AS VARCHAR){% endif %}{{ ", " if not loop.last }}{% endfor %})) AS VARCHAR) AS "__sqlanon_hrow"
{% endif %}
{% endif %}
