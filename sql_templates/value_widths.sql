{# The bytes of the `widths` columns' values (_widths.sql) over the first
   `rows` rows the database hands out, and how many there were: a cheap
   look (LIMIT reads no further) at the columns the statistics' pass does
   not read (domain_stats.sql sums the others'). #}
SELECT count(*) AS {{ "n_rows" | ident }}
{% include "_widths.sql" %}
FROM (
    SELECT {% for c in widths %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}

    FROM {{ relation }}
    LIMIT {{ rows | lit }}
) AS {{ "__sqlanon_first" | ident }}
