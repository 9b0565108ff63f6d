{# A file source as a relation. Paths are escaped literals: DuckDB table
   functions take constant arguments. #}
{% if fmt == "parquet" %}
read_parquet({{ path | lit }}, hive_partitioning = {{ hive | lit }}, union_by_name = true)
{% else %}
read_csv({{ path | lit }}, header = true, hive_partitioning = {{ hive | lit }}, union_by_name = true)
{% endif %}
