{# The portable sample for the other SQLAlchemy dialects (no TABLESAMPLE
   there): every row is numbered and a seeded multiplicative hash of its
   number, shifted by the seed, keeps about pct % of the rows. The server does the filtering; it is
   repeatable as long as the table's physical order does not change. #}
SELECT {% for c in columns %}{{ c | ident }}{{ ", " if not loop.last }}{% endfor %}

{% if whole %}
FROM {{ relation }}
{% else %}
FROM (
    SELECT {% for c in columns %}{{ c | ident }}, {% endfor %}ROW_NUMBER() OVER () AS {{ "__sqlanon_rn" | ident }}
    FROM {{ relation }}
) {{ "__sqlanon_sample" | ident }}
WHERE (({{ "__sqlanon_rn" | ident }} * 2654435761) % 4294967296 + {{ hash_offset | lit }}) % 4294967296 < {{ hash_limit | lit }}
{% endif %}
