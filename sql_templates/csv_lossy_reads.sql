{# What DuckDB's typed reading of a CSV file would lose, counted on the
   file's text (`relation` reads it as text), in one pass:
   - per column of `doubles` (text DuckDB guesses to be DOUBLE), the values
     of more than 15 significant digits that a DOUBLE rounds
     (123456789012345678901234567890 becomes 1.2345678901234568e+29): the
     digits left once the exponent, the trailing zeros, every non-digit and
     the leading zeros are taken away, unless they are those of the double's
     own shortest text (0.30000000000000004, as pandas writes doubles,
     reads back exactly) (`d<i>`);
   - per column of `times` (text DuckDB reads as a timestamp or a time, to
     microseconds), the values with a non-zero digit past the sixth decimal
     of a second, which that reading cuts (`t<i>`; SQL Server's seven
     decimals, `10:00:00.1234560`, lose nothing);
   - per column of `integers` (text DuckDB guessed to be integers from the
     rows it sniffed), the numbers with a fraction, which that reading
     rounds (`i<i>`; `1e3` and `+42` are read exactly), and the integers
     written with leading zeros, a base prefix or digit separators
     (`0042`, `0x10`, `1_000`), whose text that reading drops: a ZIP code
     `02134` published as 2134 (`l<i>`);
   - per column of `dates` (text DuckDB guessed to be dates), the ISO
     timestamps with a time of day other than midnight, whose time that
     reading drops (`a<i>`), and the dates followed, after a space, by
     other text that is no timestamp's ('0044-03-15 BC', as PostgreSQL
     writes a date before year 1; '12:00 PM'), which that reading drops:
     44 BC read as 44 AD (`b<i>`; a substring test, not a regular
     expression: 0.86 -> 1.19 s, not 1.66 s, over 5M dates, helper-146);
   - per column of `yeared` (text DuckDB guessed to be dates or timestamps),
     a value written with a two-digit year ('12/25/45'), which that reading
     takes as 2045 (00-68 as 2000-2068) (`y<i>`);
   - per column of `naive` (text DuckDB guessed to be timestamps without a
     time zone, or times, from the rows it sniffed), the values with a
     non-zero UTC offset after their time of day, which that reading drops
     (`2020-01-05 10:00:00+05:00` becomes 10:00, not 05:00) (`z<i>`);
   - per column of `booleans` (text DuckDB guessed to be BOOLEAN), whether
     a truth value is written more than one way ('true' and 'yes', 'false'
     and '0'; case aside), which that reading makes one: the text 'yes'
     published as true (`o<i>`);
   - per column of `worded` (text QIs), the values that are numbers
     (`w<i>`), those that are ISO dates or timestamps (`wd<i>`; a failed
     cast is slow, words are not cast at all: helper-112) and all its
     values (`v<i>`): an 'n/a' among numbers, a date in another format
     among ISO ones.
   The integers' counts are taken over the rows where one of them is not
   written as its number reads back (`CAST(TRY_CAST(x AS BIGINT) AS
   VARCHAR)`, '-12' as '-12'): a row of a fraction, a leading zero, a base
   prefix, a separator (or a blank, an exponent, a sign) is such a row.
   DuckDB evaluates an aggregate's FILTER on every row, and the two checks
   per column cost 1.3 s over 1M rows of 11 integer columns; the rows'
   filter ~0.1 s (BENCHMARKS.md, section 2). #}
SELECT *
FROM
{% if doubles or times or dates or naive or booleans or worded or not integers %}
(SELECT count(*) AS "n"
{% for c in doubles %}
    , count(*) FILTER (WHERE length(ltrim(regexp_replace(regexp_replace(regexp_replace(trim({{ c | ident }}),
        '[eE].*$', ''), '\.?0*$', ''), '[^0-9]', '', 'g'), '0')) > 15
      AND ltrim(regexp_replace(regexp_replace(regexp_replace(trim({{ c | ident }}),
        '[eE].*$', ''), '\.?0*$', ''), '[^0-9]', '', 'g'), '0')
       <> ltrim(regexp_replace(regexp_replace(regexp_replace(CAST(TRY_CAST(trim({{ c | ident }}) AS DOUBLE) AS VARCHAR),
        '[eE].*$', ''), '\.?0*$', ''), '[^0-9]', '', 'g'), '0')) AS {{ ("d" ~ loop.index0) | ident }}
{% endfor %}
{% for c in times %}
    , count(*) FILTER (WHERE regexp_matches(trim({{ c | ident }}), '[0-9]:[0-9]{2}\.[0-9]{6}[0-9]*[1-9]')) AS {{ ("t" ~ loop.index0) | ident }}
{% endfor %}
{% for c in dates %}
    , count(*) FILTER (WHERE TRY_CAST(trim({{ c | ident }}) AS TIMESTAMP) <> CAST(TRY_CAST(trim({{ c | ident }}) AS TIMESTAMP) AS DATE)) AS {{ ("a" ~ loop.index0) | ident }}
{% endfor %}
{% for c in dates %}
    , count(*) FILTER (WHERE contains(trim({{ c | ident }}), ' ') AND TRY_CAST(trim({{ c | ident }}) AS TIMESTAMP) IS NULL
      AND TRY_CAST(trim({{ c | ident }}) AS DATE) IS NOT NULL) AS {{ ("b" ~ loop.index0) | ident }}
{% endfor %}
{% for c in yeared %}
    , min(nullif(trim({{ c | ident }}), '')) FILTER (WHERE regexp_matches(trim({{ c | ident }}), '^\d{1,2}[/.-]\d{1,2}[/.-]\d{2}(\s|T|$)')) AS {{ ("y" ~ loop.index0) | ident }}
{% endfor %}
{% for c in naive %}
    , count(*) FILTER (WHERE regexp_matches(trim({{ c | ident }}), '[0-9]:[0-9]{2}(:[0-9]{2}(\.[0-9]*)?)?[+-][0-9]{1,2}(:?[0-9]{2})?$')
      AND NOT regexp_matches(trim({{ c | ident }}), '[+-]0{1,2}(:?00)?$')) AS {{ ("z" ~ loop.index0) | ident }}
{% endfor %}
{% for c in booleans %}
    , (count(DISTINCT lower(trim({{ c | ident }}))) FILTER (WHERE TRY_CAST(trim({{ c | ident }}) AS BOOLEAN)) > 1
      OR count(DISTINCT lower(trim({{ c | ident }}))) FILTER (WHERE NOT TRY_CAST(trim({{ c | ident }}) AS BOOLEAN)) > 1) AS {{ ("o" ~ loop.index0) | ident }}
{% endfor %}
{% for c in worded %}
    , count(*) FILTER (WHERE TRY_CAST({{ c | ident }} AS DOUBLE) IS NOT NULL) AS {{ ("w" ~ loop.index0) | ident }}
    , count(CASE WHEN regexp_matches({{ c | ident }}, '^\s*\d{4}-\d') THEN TRY_CAST(trim({{ c | ident }}) AS TIMESTAMP) END) AS {{ ("wd" ~ loop.index0) | ident }}
    , count({{ c | ident }}) AS {{ ("v" ~ loop.index0) | ident }}
{% endfor %}
FROM {{ relation }}) AS "__sqlanon_all_rows"
{% if integers %}
CROSS JOIN
{% endif %}
{% endif %}
{% if integers %}
(SELECT
{% for c in integers %}
    {% if not loop.first %}, {% endif %}count(*) FILTER (WHERE TRY_CAST(trim({{ c | ident }}) AS DOUBLE) <> trunc(TRY_CAST(trim({{ c | ident }}) AS DOUBLE))) AS {{ ("i" ~ loop.index0) | ident }}
    , count(*) FILTER (WHERE regexp_matches(trim({{ c | ident }}), '^[+-]?(0[0-9]|0[xXbBoO]|[0-9]+_)')) AS {{ ("l" ~ loop.index0) | ident }}
{% endfor %}
FROM {{ relation }}
WHERE {% for c in integers %}{% if not loop.first %} OR {% endif %}CAST(TRY_CAST({{ c | ident }} AS BIGINT) AS VARCHAR) IS DISTINCT FROM {{ c | ident }}{% endfor %}) AS "__sqlanon_integers"
{% endif %}
