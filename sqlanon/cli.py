"""The ``sqlanon`` command line: click parsing over :mod:`sqlanon.api`.

Exit codes: 0 success, 1 the run failed (data, privacy constraint, I/O,
verification), 2 usage or configuration error, 130 interrupted.
"""

from __future__ import annotations

import functools
import json
import logging
import sys

import click

from . import api
from .config import GENERALIZATIONS, INTERVAL_FORMATS
from .errors import SqlanonError


def _split(values: tuple[str, ...]) -> list[str]:
    """``--qi a,b --qi c`` → ``[a, b, c]``."""
    out: list[str] = []
    for v in values:
        out += [part.strip() for part in v.split(",") if part.strip()]
    return out


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    """``COL=VALUE`` options → dict (split at the last ``=``: names may hold one)."""
    out: dict[str, str] = {}
    for v in values:
        col, sep, val = v.rpartition("=")
        if not sep or not col or not val:
            raise click.UsageError(f"{option} takes COLUMN=VALUE, got {v!r}")
        out[col] = val
    return out


def handle_errors(fn):
    """Turn sqlanon errors into a one-line ``Error:`` and their exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        debug = kwargs.pop("debug", False)
        try:
            return fn(*args, **kwargs)
        except SqlanonError as exc:
            if debug:
                raise
            click.echo(f"Error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("Interrupted; nothing was published.", err=True)
            sys.exit(130)
        except Exception as exc:  # an unexpected failure: still one line, unless --debug
            if debug:
                raise
            click.echo(f"Error: internal error ({type(exc).__name__}: {exc}); rerun with --debug for details", err=True)
            sys.exit(1)

    return wrapper


debug_option = click.option("--debug", is_flag=True, help="Show the full traceback of an error.")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="sqlanon")
@click.option("-v", "--verbose", count=True, help="Log progress to stderr (-vv for debug).")
def main(verbose: int) -> None:
    """Publish k-anonymous and l-diverse copies of tables (distributed Mondrian).

    \b
    Example:
      sqlanon anonymize examples/adults.csv -o adults_anon.parquet \\
          --qi age,education-num,race,native-country \\
          --hierarchy native-country=hierarchies/countries.json \\
          --sensitive income -k 10 -l 2
      sqlanon verify adults_anon.parquet --qi age,education-num,race,native-country \\
          --sensitive income -k 10 -l 2
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)


@main.command()
@click.argument("input", metavar="INPUT")
@click.option("-o", "--output", required=True, help="Output file (.parquet or .csv).")
@click.option("--qi", "qi", multiple=True, required=True, help="Quasi-identifier columns, comma-separated.")
@click.option("-k", type=int, required=True, help="Every equivalence class has at least k rows (k >= 2).")
@click.option("-l", "l_", type=int, default=1, show_default=True, help="Distinct sensitive values per class.")
@click.option("--sensitive", multiple=True, help="Sensitive columns, comma-separated (needed for -l > 1).")
@click.option(
    "--hierarchy", multiple=True, metavar="COL=FILE",
    help="Generalization hierarchy of a QI column (JSON tree or CSV levels; see hierarchies/README.md).",
)
@click.option(
    "--generalization", multiple=True, metavar="COL=KIND",
    help=f"How to generalize a QI: {', '.join(GENERALIZATIONS)}. Default: hierarchy if given, "
    "interval for numbers and dates, set otherwise.",
)
@click.option("--drop", multiple=True, help="Columns to remove from the output (direct identifiers), comma-separated.")
@click.option(
    "--interval-format", type=click.Choice(INTERVAL_FORMATS), default="text", show_default=True,
    help="text: '[lo, hi]'; bounds: typed columns COL_lo and COL_hi.",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing output (only once the new one is verified).")
@click.option("--json", "as_json", is_flag=True, help="Print the run's metrics and timings as one JSON object.")
@debug_option
@handle_errors
def anonymize(input, output, qi, k, l_, sensitive, hierarchy, generalization, drop, interval_format, overwrite, as_json):
    """Anonymize INPUT (a Parquet/CSV file, glob or directory) into OUTPUT.

    Non-QI columns pass through unchanged. The output is verified with SQL
    (k and l per class) before it is put in place; on any error nothing is
    written and an existing output is left as it was.
    """
    result = api.anonymize(
        input,
        output,
        qi=_split(qi),
        k=k,
        l=l_,
        sensitive=_split(sensitive),
        hierarchies=_pairs(hierarchy, "--hierarchy"),
        generalization=_pairs(generalization, "--generalization"),
        drop=_split(drop),
        overwrite=overwrite,
        interval_format=interval_format,
    )
    if as_json:
        click.echo(json.dumps(result.to_dict()))
        return
    m = result.metrics
    click.echo(
        f"wrote {result.output}: {m.rows} rows in {m.classes} classes (min size {m.min_class_size}), "
        f"k={m.k} l={m.l}, DP={m.dp}, NCP={m.ncp:.6g}, GCP={m.gcp:.4f}, {result.timings['total']:.2f}s"
    )


@main.command()
@click.argument("input", metavar="TABLE_OR_FILE")
@click.option("--qi", "qi", multiple=True, required=True, help="Generalized QI columns, comma-separated.")
@click.option("-k", type=int, required=True, help="Minimum rows per class.")
@click.option("-l", "l_", type=int, default=1, show_default=True, help="Minimum distinct sensitive values per class.")
@click.option("--sensitive", multiple=True, help="Sensitive columns, comma-separated.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@debug_option
@handle_errors
def verify(input, qi, k, l_, sensitive, as_json):
    """Check that TABLE_OR_FILE is k-anonymous and l-diverse.

    Groups the rows by the QI columns; exits 0 when every group has at least
    k rows and l distinct values of each sensitive column, 1 otherwise (and
    lists the violating groups).
    """
    check = api.verify(input, qi=_split(qi), k=k, l=l_, sensitive=_split(sensitive))
    if as_json:
        click.echo(json.dumps(check.to_dict(), default=str))
    elif check.ok:
        click.echo(
            f"OK: {check.rows} rows in {check.classes} classes, min class size {check.min_class_size}"
            + (f", min distinct sensitive {check.achieved_l}" if check.min_distinct else "")
        )
    else:
        click.echo(f"FAILED: {check.describe_failure(limit=20)}", err=True)
    sys.exit(0 if check.ok else 1)


if __name__ == "__main__":  # pragma: no cover
    main()
