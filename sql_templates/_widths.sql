{# The bytes of each `widths` column's values, summed (a NULL as 0, or
   NULL where every value is), one `__sqlanon_width<i>` each: text by its
   bytes whatever its encoding (SQLite's length() counts a text's
   characters: its bytes are a BLOB's), the `binary` columns' as they are.
   For the memory estimate of the default fragments
   (coordinator.fragments_for_memory). Included after the first item of a
   SELECT list. #}
{% for c in widths | default([]) %}
{% if dialect == "postgres" %}
    , sum(octet_length({{ c | ident }}{% if c not in binary | default([]) %}::text{% endif %}))
{% elif dialect == "duckdb" and c in binary | default([]) %}
    , sum(octet_length({{ c | ident }}))
{% elif dialect == "duckdb" %}
    , sum(strlen(CAST({{ c | ident }} AS VARCHAR)))
{% elif dialect == "sqla:sqlite" %}
    , sum(length(CAST({{ c | ident }} AS BLOB)))
{% else %}
    , sum(length({{ c | ident }}))
{% endif %}
        AS {{ ("__sqlanon_width" ~ loop.index0) | ident }}
{% endfor %}
