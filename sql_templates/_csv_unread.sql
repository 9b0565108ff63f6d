{# Whether the text `c` of a CSV column DuckDB guessed to hold numbers
   (BIGINT when it is one of `integers`, else DOUBLE) is one its typed
   reading fails on: blanks, no number ('n/a'), for an integer 'inf' or one
   past BIGINT. A cast of the text is what that reading does (the same
   answer for 24 spellings: ' 5 ', '1e3', '5.5', '1_000', '0x10', 'inf',
   '1e19'…), at a tenth of the cost of trimming and casting it to DOUBLE
   first. NULL (an empty field) reads. Included by csv_lossy_reads.sql and
   csv_unread_row.sql. #}
({{ c | ident }} IS NOT NULL AND TRY_CAST({{ c | ident }} AS {% if c in integers %}BIGINT{% else %}DOUBLE{% endif %}) IS NULL)
