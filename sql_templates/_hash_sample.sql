{# The FROM/WHERE of a repeatable sample without TABLESAMPLE: every row of
   `relation` is numbered, and a seeded multiplicative hash of its number
   keeps the share hash_limit / 2^32 of the rows (a well-spread deterministic
   selection, not independent draws; constants from
   sqlanon.coordinator._portable_sample_hash, the product stays below 2^63).
   The database does the filtering. Repeatable while it returns the rows in
   the same order (ROW_NUMBER() OVER () promises no order). Included by the
   sample.sql of the dialects that need it. #}
FROM (
    SELECT {% for c in columns %}{{ c | ident }}, {% endfor %}ROW_NUMBER() OVER () AS {{ "__sqlanon_rn" | ident }}
    FROM {{ relation }}
) {{ "__sqlanon_sample" | ident }}
WHERE ((({{ "__sqlanon_rn" | ident }} % 4294967296) * {{ hash_multiplier | lit }}) % 4294967296 + {{ hash_offset | lit }}) % 4294967296 < {{ hash_limit | lit }}
