{# A file source as a relation: a list of paths or globs. Paths are escaped
   literals: DuckDB table functions take constant arguments. CSV: ``as_text``
   reads every column as the text written, ``text_columns`` only those
   (``hive_text``: the partition keys among them);
   ``header`` false reads the header as the first row (to check the names);
   ``ours``: a file sqlanon wrote, read in the dialect DuckDB writes (its
   escape, a doubled quote, for any file verify reads too);
   ``delim``: the delimiter, or none for DuckDB's sniffer to guess;
   ``dateformat``, ``timestampformat``: how dates are written, or none to guess. The
   quote is always '"': DuckDB's sniffer, seeing no quoted value in the
   first rows, would guess "no quoting" and split a later "Smith, J".
   No comment character: the sniffer, seeing lines that start with '#',
   dropped them and cut every value at a '#' ("apt #4").
   ``filename``: a column of that name holds each row's file.
   ``max_line_size``: the longest line in bytes the reader takes (DuckDB's
   default, 2,000,000, when none). ``encoding``: the text's (latin-1,
   utf-16), when not UTF-8. ``compression``: the files' (gzip, zstd, none),
   when they share one.
   ``hive_nulls``: ``(key, type)`` of the partition keys with a directory
   named ``hive_null`` (``city=__HIVE_DEFAULT_PARTITION__``, Spark's and
   Hive's NULL), read as NULL there, and cast to ``type`` (what DuckDB
   types the key's other values as: a simple type's name, which DuckDB
   takes quoted) unless none.
   ``can_have_nan``: a float column's min/max statistics leave NaN out (as
   the Parquet format asks, and pyarrow writes them); DuckDB trusting them
   folded NULLIF(x, 'NaN') and x != 1 to drop the NaN rows (duckdb#25521):
   a class of NaN, NULL and 5 counted 3 sensitive values (helper-68). #}
{% set files %}[{% for p in paths %}{{ p | lit }}{{ ", " if not loop.last }}{% endfor %}]{% endset %}
{% if hive_nulls %}(SELECT * REPLACE ({% for k, t in hive_nulls %}{% if t %}CAST({% endif %}nullif({{ k | ident }}, {{ hive_null | lit }}){% if t %} AS {{ t | ident }}){% endif %} AS {{ k | ident }}{{ ", " if not loop.last }}{% endfor %}) FROM {% endif %}
{% if fmt == "parquet" %}
read_parquet({{ files }}, hive_partitioning = {{ hive | lit }}, union_by_name = true, can_have_nan = true{% if filename %}, filename = {{ filename | lit }}{% endif %})
{% else %}
read_csv({{ files }}, header = {{ header | lit }}, hive_partitioning = {{ hive | lit }}, union_by_name = true{% if as_text %}, all_varchar = true{% endif %}{% if delim %}, delim = {{ delim | lit }}{% endif %}{% if dateformat %}, dateformat = {{ dateformat | lit }}{% endif %}{% if timestampformat %}, timestampformat = {{ timestampformat | lit }}{% endif %}{% if ours %}, escape = '"'{% endif %}{% if max_line_size is defined and max_line_size %}, max_line_size = {{ max_line_size | lit }}{% endif %}{% if null_strings is defined and null_strings %}, nullstr = [{% for n in null_strings %}{{ n | lit }}{{ ", " if not loop.last }}{% endfor %}]{% endif %}{% if every_row is defined and every_row %}, sample_size = -1{% endif %}{% if encoding is defined and encoding %}, encoding = {{ encoding | lit }}{% endif %}{% if compression is defined and compression %}, compression = {{ compression | lit }}{% endif %}, quote = '"', comment = ''{% if filename %}, filename = {{ filename | lit }}{% endif %}{% if text_columns %}, types = { {% for c in text_columns %}{{ c | lit }}: 'VARCHAR' {{ ", " if not loop.last }}{% endfor %} }{% endif %}{% if hive_text %}, hive_types = { {% for c in hive_text %}{{ c | lit }}: 'VARCHAR' {{ ", " if not loop.last }}{% endfor %} }{% endif %})
{% endif %}
{% if hive_nulls %}){% endif %}
