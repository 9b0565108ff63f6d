{# The checksums (_checksum.sql) of the `checksum` columns, in one statement. #}
SELECT count(*) AS "__sqlanon_rows"
{% include "_checksum.sql" %}
FROM {{ relation }}
