{# A file source as a relation: a list of paths or globs. Paths are escaped
   literals: DuckDB table functions take constant arguments. #}
{% set files %}[{% for p in paths %}{{ p | lit }}{{ ", " if not loop.last }}{% endfor %}]{% endset %}
{% if fmt == "parquet" %}
read_parquet({{ files }}, hive_partitioning = {{ hive | lit }}, union_by_name = true)
{% else %}
read_csv({{ files }}, header = true, hive_partitioning = {{ hive | lit }}, union_by_name = true{% if as_text %}, all_varchar = true{% endif %})
{% endif %}
