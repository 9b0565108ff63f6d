{# A repeatable sample drawn by the server: BERNOULLI keeps each row with
   probability pct/100 (about `rows` rows). TABLESAMPLE applies to tables,
   materialized views and partitioned tables only: from a view (`samplable`
   false) the rows are numbered and a seeded hash of the number keeps the
   share hash_limit / 2^32, as the portable sample does (sqlalchemy/sample.sql;
   repeatable within the run's snapshot). #}
SELECT {% for c in columns %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}

{% if whole or samplable %}
FROM {{ relation }}
{% if not whole %}
TABLESAMPLE BERNOULLI ({{ pct | lit }}) REPEATABLE ({{ seed | lit }})
{% endif %}
{% else %}
FROM (
    SELECT {% for c in columns %}{{ c | ident }}, {% endfor %}ROW_NUMBER() OVER () AS {{ "__sqlanon_rn" | ident }}
    FROM {{ relation }}
) {{ "__sqlanon_sample" | ident }}
WHERE ((({{ "__sqlanon_rn" | ident }} % 4294967296) * {{ hash_multiplier | lit }}) % 4294967296 + {{ hash_offset | lit }}) % 4294967296 < {{ hash_limit | lit }}
{% endif %}
