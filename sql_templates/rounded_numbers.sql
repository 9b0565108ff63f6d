{# Per column of `columns` (CSV text that DuckDB guesses to be DOUBLE), how
   many values have more than 15 significant digits, which a DOUBLE rounds
   (123456789012345678901234567890 becomes 1.2345678901234568e+29): the
   digits left once the exponent, the trailing zeros, every non-digit and
   the leading zeros are taken away. `relation` reads the file as text. #}
SELECT
{% for c in columns %}
    count(*) FILTER (WHERE length(ltrim(regexp_replace(regexp_replace(regexp_replace(trim({{ c | ident }}),
        '[eE].*$', ''), '\.?0*$', ''), '[^0-9]', '', 'g'), '0')) > 15) AS {{ ("r" ~ loop.index0) | ident }}{% if not loop.last %},{% endif %}
{% endfor %}
FROM {{ relation }}
