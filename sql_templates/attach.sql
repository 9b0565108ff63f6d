{# The path of a DuckDB database file for ATTACH (a constant: escaped literal). #}
{{ path | lit }}
