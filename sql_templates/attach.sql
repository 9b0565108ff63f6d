{# The path of a DuckDB database file for ATTACH (a constant: escaped literal).
   Absolute: DuckDB takes a prefix such as 'md:' (MotherDuck, a cloud
   service, through an extension it would download) as a place, not a name. #}
{{ path | lit }}
