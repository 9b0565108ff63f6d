{# The first data row (1 after the header) of the CSV file `relation` (read
   as text, in the file's order) whose column `c` DuckDB's typed reading
   fails on (_csv_unread.sql): where to look, without the value. #}
SELECT min("__sqlanon_row") FROM (
    SELECT row_number() OVER () AS "__sqlanon_row", {{ c | ident }} FROM {{ relation }}
) WHERE {% include "_csv_unread.sql" %}
