{# Whether the text `c` of a CSV column DuckDB guessed to hold numbers
   (BIGINT when it is one of `integers`, else DOUBLE) is one its typed reading fails on:
   blanks, no number ('n/a'), or for an integer one no BIGINT holds
   ('inf', '1e400', 99999999999999999999; '1e3' reads as 1000). NULL (an
   empty field) reads. Included by csv_lossy_reads.sql and csv_unread_row.sql. #}
({{ c | ident }} IS NOT NULL AND (trim({{ c | ident }}) = '' OR TRY_CAST(trim({{ c | ident }}) AS DOUBLE) IS NULL{% if c in integers %}
      OR NOT isfinite(TRY_CAST(trim({{ c | ident }}) AS DOUBLE))
      OR (TRY_CAST(trim({{ c | ident }}) AS BIGINT) IS NULL AND abs(TRY_CAST(trim({{ c | ident }}) AS DOUBLE)) >= 9.2e18){% endif %}))
