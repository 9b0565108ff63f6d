"""The ``sqlanon`` command line: click parsing over :mod:`sqlanon.api`.

Exit codes: 0 success, 1 the run failed (data, privacy constraint, I/O,
verification), 2 usage or configuration error, 130 interrupted (Ctrl-C),
143 terminated (SIGTERM), 129 hung up (SIGHUP: the terminal went away).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import glob
import logging
import numbers
import os
import re
import reprlib
import resource
import signal
import sys
import threading
import traceback
from typing import TYPE_CHECKING, NoReturn

import click
import yaml

from . import executors, interrupts
from .config import (GENERALIZATIONS, INTERVAL_FORMATS, MIN_K, MIN_L, STRATEGIES, file_format, quoted_name,
                     has_wildcard, physical_path, split_names, sqlite_url_from, strict_json, suggest)
from .errors import LOGGERS, ConfigError, InputError, SqlanonError, plain_log_line, redact_chain, redact_urls
from .executors import EXECUTORS

if TYPE_CHECKING:  # sqlanon.api is imported inside the commands (below)
    from .coordinator import RunResult
    from .verification import Verification

# sqlanon.api (DuckDB, Arrow, numpy) is imported inside the commands, after
# `anonymize` has started the worker pool's fork server: the two then load
# in parallel (see executors.start_local_server).


def _split(values: tuple[str, ...]) -> list[str]:
    """``--qi a,b --qi c`` → ``[a, b, c]`` (:func:`config.split_names`)."""
    return [name for v in values for name in split_names(v)]


def _quoted_item(name: str) -> str:
    """A YAML list's column name as one item of :func:`config.split_names`'s
    lists: a list item is one name, commas and all."""
    return quoted_name(name) if "," in name or name.strip() != name or name.startswith('"') else name


def _also_in_file(ctx: click.Context, name: str) -> list[str]:
    """The --config file's column list ``name`` when the command line gives
    it too (it then replaces the file's, as every flag does), else []."""
    from_file = (ctx.default_map or {}).get(name)
    if from_file and ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
        return _split(tuple(from_file))
    return []


def _adding(ctx: click.Context, name: str, values: tuple[str, ...]) -> list[str]:
    """``--drop`` (or ``--keep``) on the command line adds to a --config
    file's ``drop`` (``keep``), rather than replace it as other flags do:
    one more dropped column must not publish the direct identifiers the job
    file drops."""
    names = _split(values)
    from_file = [c for c in _also_in_file(ctx, name) if c not in names]
    # Errors about these name the file (_config_keys_named).
    ctx.meta.setdefault("sqlanon.file_only", {})[name] = from_file
    return from_file + names


def _not_below_file(ctx: click.Context, name: str, flag: str, value: int, least: int | None = None) -> int:
    """``-k``/``-l`` on the command line may raise the --config file's
    value, not lower it: ``-l 1`` turned a job's l check off, and ``-k 2``
    published classes of two where the file asks for ten (helper-29).
    ``least``: the smallest value the command takes (anonymize's k and l by
    default); below it the value's own check says what is wrong (helper-30)."""
    in_file = (ctx.default_map or {}).get(name)
    if least is None:
        least = MIN_K if name == "k" else MIN_L
    if (ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE and isinstance(in_file, int)
            and least <= value < in_file):
        key = ctx.meta.get("sqlanon.config_keys", {}).get(name, flag.lstrip("-"))
        raise ConfigError(
            f"{flag} {value} is below {key!r} in {ctx.meta['sqlanon.config']!r} ({in_file}): a flag may raise what "
            "the job protects, not lower it; edit the file"
        )
    return value


def _covering(ctx: click.Context, name: str, values: tuple[str, ...], why: str) -> list[str]:
    """``--qi`` or ``--sensitive`` on the command line replaces the --config
    file's list, but must not leave any of its columns out: a QI left out
    would be published unchanged, a sensitive column no longer checked for l."""
    names = _split(values)
    left_out = [c for c in _also_in_file(ctx, name) if c not in names]
    if left_out:
        option = "--" + name
        raise ConfigError(
            f"{option} leaves out {', '.join(map(repr, left_out))} of {name!r} in "
            f"{ctx.meta['sqlanon.config']!r}, {why}: name {'it' if len(left_out) == 1 else 'them'} in {option} "
            "too, or edit the file"
        )
    return names


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


_OUTSIDE_QUOTES = re.compile(r',(?=(?:[^"]*"[^"]*")*[^"]*$)')
"""A comma outside double quotes: '"a=b,z"=set,age=set' is two pairs (helper-192)."""
_QUOTED_PAIR = re.compile(r'"((?:[^"]|"")*)"=(.*)', re.S)
"""``"grp=code"=FILE``: a column named in double quotes (``""`` for one), as in the lists of names."""


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    """``COL=VALUE`` options → dict, split at the first ``=`` (paths under
    hive-style directories hold ``=``; column names rarely do) or, for a
    kind (a word), the last; a column in double quotes is taken whole (a
    column named 'grp=code' could not be given a hierarchy: helper-188)."""
    out: dict[str, str] = {}
    shape = "COLUMN=FILE" if option == "--hierarchy" else "COLUMN=KIND"
    if option == "--generalization":  # a kind is a word: 'age=interval, zip=prefix' is two (helper-80)
        split = [_OUTSIDE_QUOTES.split(v) for v in values]
        values = tuple(p.strip() for v, parts in zip(values, split)
                       for p in (parts if len(parts) > 1 and all("=" in p for p in parts) else [v]))
    for v in values:
        quoted = _QUOTED_PAIR.fullmatch(v)
        if quoted:
            col, sep, val = quoted[1].replace('""', '"'), "=", quoted[2]
        else:
            col, sep, val = v.partition("=")
            if option == "--generalization" and val not in GENERALIZATIONS and v.rpartition("=")[2] in GENERALIZATIONS:
                col, sep, val = v.rpartition("=")  # grp=code=prefix: the kind is the last word
        if not sep or not col or not val:
            raise click.UsageError(f"{option} takes {shape}, got {v!r}")
        if col in out and out[col] != val:  # the last one used to win, silently
            raise click.UsageError(f"{option} names column {col!r} twice ({out[col]!r} and {val!r})")
        out[col] = val
    return out


def _per_column(ctx: click.Context, name: str, values: tuple[str, ...], option: str) -> dict[str, str]:
    """``--hierarchy`` or ``--generalization`` on the command line changes
    the --config file's mapping column by column: it replaced the whole
    mapping, so one more ``--hierarchy race=…`` silently published the
    file's other hierarchy columns as sets."""
    in_file = ctx.meta.get("sqlanon.config_pairs", {}).get(name, {})
    source = ctx.get_parameter_source(name)
    if source is click.core.ParameterSource.DEFAULT_MAP:
        return dict(in_file)
    pairs = _pairs(values, option)
    if source is click.core.ParameterSource.COMMANDLINE:
        # Errors about the file's own columns name the file (_config_keys_named).
        ctx.meta.setdefault("sqlanon.file_only", {})[name] = [c for c in in_file if c not in pairs]
        pairs = {**in_file, **pairs}
    return pairs


def _merged(ctx: click.Context, name: str, values: tuple[str, ...], other: str, other_values: tuple[str, ...],
            switches) -> dict[str, str]:
    """``--<name>`` merged with the --config file's (:func:`_per_column`),
    less the file's entry of a column that ``--<other>`` on the command line
    (and not ``--<name>`` too) sets its own way, ``switches(value)``: the
    command line could not switch a job's hierarchy off (``--generalization
    zip=prefix``), and a job's ``generalization: {zip: prefix}`` and
    ``--hierarchy zip=…`` were refused as contradicting each other."""
    def given(option: str) -> bool:
        return ctx.get_parameter_source(option) is click.core.ParameterSource.COMMANDLINE

    pairs = _per_column(ctx, name, values, f"--{name}")
    if given(other):
        mine = _pairs(values, f"--{name}") if given(name) else {}
        for column, value in _pairs(other_values, f"--{other}").items():
            if switches(value) and column not in mine:
                pairs.pop(column, None)
    return pairs


_QUOTED_NAME = re.compile(r"'(?:[^'\\]|\\.)*'" + r'|"(?:[^"\\]|\\.)*"')
"""A name as repr() shows it: in single quotes, or double ones when it holds a single quote."""


_ABOUT_OPTIONS = [
    (re.compile(r"^column .+ has a hierarchy but generalization .+; drop one of the two$", re.S),
     ("hierarchy", "generalization")),
    (re.compile(r"^quasi-identifier .+ and '\w+', asked for it, needs ", re.S), ("generalization",)),
    (re.compile(r"^column .+ cannot be both a quasi-identifier and sensitive$", re.S), ("qi", "sensitive")),
]
"""Errors about options' values that name no option, and the options (their
parameters' names) a job file's keys are then named for."""


def _config_keys_named(message: str) -> str:
    """A usage error about a value that came from the --config file names its
    key and the file, not the flag the user did not type: ``'workers' in
    'job.yml' must be a positive integer``, not ``--workers must be…``."""
    ctx = click.get_current_context(silent=True)
    keys = ctx.meta.get("sqlanon.config_keys") if ctx is not None else None
    if not keys:
        return message
    file_only = ctx.meta.get("sqlanon.file_only", {})

    def who(opt: str, name: str) -> str:
        """Where the option ``opt`` got the column ``name``: the flag, or the file's key."""
        for p in ctx.command.params:
            if opt in p.opts and p.name in keys and (
                    ctx.get_parameter_source(p.name) is click.core.ParameterSource.DEFAULT_MAP
                    or name in map(repr, file_only.get(p.name, ()))):
                return f"{keys[p.name]!r} in {ctx.meta['sqlanon.config']!r}"
        return opt

    # A column both kept (or dropped) and protected, the two from different
    # places: each named where it came from ("'keep' in 'job.yml' names
    # 'sex', which --qi makes a quasi-identifier"), not the file alone for
    # a column the command line added (helper-80).
    role = re.fullmatch(r"(--keep|--drop) names ('.+'|\".+\"), which is a (quasi-identifier|sensitive column)",
                        message, re.S)
    if role:
        listed, protected = who(role.group(1), role.group(2)), who(
            "--qi" if role.group(3) == "quasi-identifier" else "--sensitive", role.group(2))
        if listed.startswith("--") != protected.startswith("--"):
            return f"{listed} names {role.group(2)}, which {protected} makes a {role.group(3)}"
    # A column the file gives the kind 'hierarchy' and no file: the file's
    # key is the advice, not --hierarchy (stop 41's list).
    lacking = re.fullmatch(r"(column ('.+'|\".+\") uses generalization 'hierarchy')( but no hierarchy file was given: )"
                           r"pass --hierarchy .+=FILE", message, re.S)
    if lacking and not who("--generalization", lacking.group(2)).startswith("--"):
        config = ctx.meta["sqlanon.config"]
        return (f"{lacking.group(1)} ({keys['generalization']!r} in {config!r}){lacking.group(3)}map "
                f"{lacking.group(2)} to one under {keys.get('hierarchy', 'hierarchy')!r} in {config!r}")
    # Options naming the same columns ("--keep and --drop both name 'ssn'"):
    # each named, column by column, where the column came from, the flag or
    # the file (helper-29, helper-30).
    both = re.fullmatch(r"(--[\w-]+) and (--[\w-]+) both name (.+)", message, re.S)
    names = re.findall(_QUOTED_NAME, both.group(3)) if both else []
    if both and ", ".join(names) == both.group(3):
        by_source: dict[tuple[str, str], list[str]] = {}
        for name in names:
            by_source.setdefault((who(both.group(1), name), who(both.group(2), name)), []).append(name)
        return "; ".join(f"{a} and {b} both name {', '.join(group)}" for (a, b), group in by_source.items())
    config = ctx.meta["sqlanon.config"]
    in_file = {p.name: keys[p.name] for p in ctx.command.params if p.name in keys
               and ctx.get_parameter_source(p.name) is click.core.ParameterSource.DEFAULT_MAP}
    by_flag = {o: in_file[p.name] for p in ctx.command.params if p.name in in_file for o in p.opts}
    # A flag of the file's value amid a message ("…: --table names a table in a DuckDB file", "(--encoding
    # utf-16)"), and the keys of a message that names none ("cannot be both…"): helper-188.
    message = re.sub(r"(?<![\w'-])(--[\w-]+) names ", lambda m: f"{by_flag[m[1]]!r} in {config!r} names "
                     if m[1] in by_flag and m.start() > 0 else m[0], message)
    message = re.sub(r"\((--[\w-]+) ([^()]+)\)$", lambda m: f"({by_flag[m[1]]!r} in {config!r}: {m[2]})"
                     if m[1] in by_flag else m[0], message)
    about = next((names for pattern, names in _ABOUT_OPTIONS if pattern.search(message)), ())
    named_keys = [in_file[n] for n in about if n in in_file]
    if named_keys:
        return f"{message} ({' and '.join(map(repr, named_keys))} in {config!r})"
    for param in ctx.command.params:
        if param.name not in keys:
            continue
        from_file = ctx.get_parameter_source(param.name) is click.core.ParameterSource.DEFAULT_MAP
        # An option without a long form is named by its letter ("k must be…").
        for opt in [o for o in param.opts if o.startswith("--")] or [o.lstrip("-") for o in param.opts]:
            named = f"{keys[param.name]!r} in {ctx.meta['sqlanon.config']!r}"
            # A column of the file's list that the flag's were added to ("--keep names 'ward'…").
            if not from_file and any(re.match(rf"{re.escape(opt)} names (column )?{re.escape(repr(c))}", message)
                                     for c in file_only.get(param.name, ())):
                return named + _keys_advised(message[len(opt):], ctx, keys)
            if not from_file:
                continue
            # Its value shown ("cannot tell the format of --metrics='hr.m'", "--metrics='m.csv': directory…").
            shown = re.sub(rf"""(?<![\w-]){re.escape(opt)}=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""",
                           lambda m: f"{m.group(1)} ({named})", message)
            if shown != message:
                return shown
            # Only a message about the value itself ("--workers must be…"), not
            # one that advises the flag ("pass --overwrite to replace it").
            if re.match(rf"{re.escape(opt)}(?![\w-])", message):
                return named + _keys_advised(message[len(opt):], ctx, keys)
    return message


def _file_values_named(message: str) -> str:
    """A runtime error's ``(--task-timeout)`` names the --config file's key
    where the value came from it: ``within 0.5 s ('task_timeout' in
    'job.yml')`` (stop 41's list). Quoted names and values stay as they are."""
    ctx = click.get_current_context(silent=True)
    keys = ctx.meta.get("sqlanon.config_keys") if ctx is not None else None
    if not keys:
        return message
    from_file = {opt: f"({keys[p.name]!r} in {ctx.meta['sqlanon.config']!r})" for p in ctx.command.params
                 if p.name in keys and ctx.get_parameter_source(p.name) is click.core.ParameterSource.DEFAULT_MAP
                 for opt in p.opts if opt.startswith("--")}
    return re.sub(rf"({_QUOTED_NAME.pattern})|\((--[\w-]+)\)",
                  lambda m: m.group(1) or from_file.get(m.group(2), m.group(0)), message)


def _keys_advised(rest: str, ctx: click.Context, keys: dict[str, str]) -> str:
    """The advice in a message about a --config file's value names the
    file's keys, as its start does: "'keep' in 'job.yml' leaves out 'ssn'
    …: list it in 'keep' …", not "in --keep"; "'l' in 'job.yml' = 2 needs
    a sensitive column ('sensitive')", not "(--sensitive)" (helper-51)."""
    by_opt = {o: keys.get(p.name, o[2:]) for p in ctx.command.params if p.name not in FLAGS_ONLY
              for o in p.opts if o.startswith("--")}

    def key(m: re.Match) -> str:
        return f"{m.group(1)}{by_opt[m.group(2)]!r}" if m.group(2) in by_opt else m.group(0)

    def setting(m: re.Match) -> str:  # "goes with --executor=dask": the file's 'executor: dask' (helper-188)
        return f"{by_opt[m.group(1)]}: {m.group(2)}" if m.group(1) in by_opt else m.group(0)

    rest = re.sub(r"(?<![\w-])(--[\w-]+)=(\w+)\b", setting, rest)
    return re.sub(r"(\(|\bin )(--[\w-]+)(?=\)|\b(?!-))", key, rest)


def _stopped(signum: int) -> str:
    """How a stop signal is told: 'Interrupted' (Ctrl-C), 'Terminated', 'Hung up'."""
    return {signal.SIGTERM: "Terminated", signal.SIGHUP: "Hung up"}.get(signum, "Interrupted")


def _published_first(signum: int) -> str:
    return f"{_stopped(signum)} once publishing had begun: the output and its metrics were published first."


def handle_errors(fn):
    """Turn sqlanon errors into a one-line ``Error:`` and their exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context(silent=True)
        debug = kwargs.pop("debug", False) or (ctx is not None and ctx.meta.get("sqlanon.debug", False))
        if _library(ctx):  # run_job: the library's errors, raised
            try:
                with interrupts.watching(library=True):
                    return fn(*args, **kwargs)
            except SqlanonError as exc:
                if exc.exit_code != 2:
                    exc.args = (_file_values_named(str(exc)),) if len(exc.args) == 1 else exc.args
                    raise
                raise type(exc)(_config_keys_named(str(exc))) from None
            except click.UsageError as exc:  # _require's (a job without input), _sample's
                exc.ctx = exc.ctx or ctx  # its help named: 'sqlanon anonymize --help' (helper-53)
                raise ConfigError(_one_line(exc).format_message()) from None
        _REPORTED.clear()  # a run of its own (in-process runs one after another: tests)
        try:
            with interrupts.watching(library=False):
                return fn(*args, **kwargs)
        except click.ClickException:
            raise  # click prints usage errors itself (exit code 2)
        except BrokenPipeError:
            # Whoever read the output went away (`| head`); the run itself is
            # done. No message (stdout is gone), the shell's code for SIGPIPE.
            sys.exit(141)
        except (KeyboardInterrupt, Exception) as exc:
            _end_progress_line()
            _REPORTED.set()  # the run's own line is next: the cluster's processes may still log their ends
            if interrupts.received() or isinstance(exc, KeyboardInterrupt):
                # Whatever the failure looks like (DuckDB reports a Ctrl-C as
                # "Query interrupted"; an import cut short fails as ImportError).
                signum = interrupts.received_signal()
                # verify publishes nothing: 'nothing was published' read as if it might have (helper-201)
                told = "the check did not finish" if fn.__name__ == "verify" else "nothing was published"
                with contextlib.suppress(OSError):  # a terminal that hung up takes no more output (EIO)
                    click.echo(f"{_stopped(signum)}; {told}.", err=True)
                sys.exit(128 + signum)
            if debug:  # the traceback, then the run's own line and exit code (--debug made exit 2 exit 1: helper-87)
                redact_chain(exc)
                with contextlib.suppress(OSError):
                    traceback.print_exception(exc, file=sys.stderr)
            if isinstance(exc, SqlanonError):
                message = (_config_keys_named if exc.exit_code == 2 else _file_values_named)(str(exc))
                click.echo(f"Error: {redact_urls(message)}", err=True)
                sys.exit(exc.exit_code)
            if isinstance(exc, OSError) and exc.errno == errno.EMFILE:
                click.echo(f"Error: too many open files: the limit (ulimit -n) is {_open_file_limit()}; raise it",
                           err=True)
                sys.exit(1)
            # An unexpected failure: still one line, unless --debug.
            click.echo(f"Error: internal error ({type(exc).__name__}: {redact_urls(str(exc))})"
                       + ("" if debug else "; rerun with --debug for details"), err=True)
            sys.exit(1)

    return wrapper


debug_option = click.option("--debug", is_flag=True, help="Show the full traceback of an error.")


class _OneLine(click.ClickException):
    """A usage error of one line (exit 2), any URL's password masked."""

    exit_code = 2

    def format_message(self) -> str:
        return redact_urls(super().format_message())


class _UsageLine(_OneLine):
    """A usage error as one line (exit 2), pointing to the help, instead of
    click's usage banner, hint and blank line around it."""


def _one_line(exc: click.UsageError) -> click.ClickException:
    ctx = exc.ctx
    param = getattr(exc, "param", None)
    config = ctx.meta.get("sqlanon.config") if ctx is not None else None
    from_file = (ctx.default_map or {}).get(param.name) if param is not None and config else None
    if from_file is not None and param.name not in ctx.meta.get("sqlanon.typed", ()):
        # The value came from the --config file: name its key (as the file
        # writes it) and the file, not the flag.
        key = ctx.meta.get("sqlanon.config_keys", {}).get(param.name, param.name)
        message = exc.format_message().replace(f"'{param.opts[-1]}'", repr(key))
        return _ConfigFileError(f"{message.rstrip('.')} (key {key!r} in {config!r})")
    where = ctx.command_path if ctx is not None else "sqlanon"
    message = exc.format_message()
    extra = re.fullmatch(r"Got unexpected extra arguments? \((.*)\)", message)
    given = ctx.params if ctx is not None else {}
    extras = extra.group(1).split(" ") if extra else []
    # `lake/*.parquet` unquoted: the shell passed its files or directories (helper-42, helper-45); one
    # existing path and no -o is rather a forgotten -o before last night's output.
    if extras and all(os.path.exists(a) for a in extras):
        if given.get("output") or len(extras) > 1:
            message += ": a glob the shell expanded? quote it ('lake/*.parquet'), or name the directory"
        else:
            message += f": did you mean -o {extras[0]}?"
    return _UsageLine(f"{message} (see '{where} --help')")


_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())
"""click 8.2+ raises it for a bare group (8.1 prints the help itself)."""


class _Main(click.Group):
    """The ``sqlanon`` group: usage errors of it and its commands are one
    line; a Ctrl-C while the command line is read (before a command's own
    handling) exits 130 with the command's line, not click's 'Aborted!',
    exit 1, which a scheduler reads as a failed run (helper-195)."""

    def make_context(self, *args, **kwargs):
        _REPORTED.clear()  # a command line of its own (in-process: tests)
        try:
            return super().make_context(*args, **kwargs)
        except _NO_ARGS as exc:  # bare `sqlanon`: the help, as it is
            click.echo(exc.ctx.get_help())
            raise SystemExit(exc.exit_code) from None
        except click.UsageError as exc:
            raise _one_line(exc) from None
        except KeyboardInterrupt:
            _interrupted_early()

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from None
        except KeyboardInterrupt:  # the command's options read (a run's own Ctrl-C is its handler's)
            _interrupted_early()


def _interrupted_early() -> NoReturn:
    """A KeyboardInterrupt past the command's handler: before it (the options
    read), or a second signal while it told the first (told once, with the
    first's exit code: helper-198)."""
    signum = interrupts.received_signal() if interrupts.received() else signal.SIGINT
    if not _REPORTED.is_set():
        with contextlib.suppress(OSError):
            click.echo(f"{_stopped(signum)}; nothing was published.", err=True)
    sys.exit(128 + signum)


class _Command(click.Command):
    """A command whose single-valued options may be given once: click keeps
    the last of ``-k 10 -k 5``, and a second -k, -l or --hierarchy file
    would silently weaken what the first asked for."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # --help wins over a --config given before it (whose errors would hide the help).
        options = args[: args.index("--")] if "--" in args else args
        ctx.meta["sqlanon.help"] = any(a in ctx.help_option_names for a in options)
        named = {opt: param for param in self.params if isinstance(param, click.Option)
                 for opt in param.opts + param.secondary_opts}
        seen: dict[str, str] = {}
        typed: set[str] = set()
        for token in args:
            if token == "--":
                break
            for opt in self._options_in(token, named):
                param = named[opt]
                typed.add(param.name)
                if param.multiple or param.count:
                    continue
                if param.name in seen:
                    first = seen[param.name]
                    raise click.UsageError(
                        f"option {opt} given twice: give it once" if first == opt
                        else f"options {first} and {opt} set the same thing: give one", ctx)
                seen[param.name] = opt
        # Which values the command line gave (click records where a value
        # came from only after converting it: a bad one was blamed on --config).
        ctx.meta["sqlanon.typed"] = typed
        return super().parse_args(ctx, args)

    @staticmethod
    def _options_in(token: str, named: dict[str, click.Option]) -> list[str]:
        """The options ``token`` gives as click reads it: ``--k=5``, ``-k5``,
        or a group of short ones, ``-qk`` (-q, -k) and ``-vk2``, whose -k a
        check of the token's start missed: ``-k 10 -qk 2`` published k=2."""
        if token.startswith("--"):
            opt = token.partition("=")[0]
            return [opt] if opt in named else []
        if not token.startswith("-") or len(token) < 2:
            return []
        found = []
        for ch in token[1:]:
            param = named.get("-" + ch)
            if param is None:
                break  # not an option (a negative number), or one click reports
            found.append("-" + ch)
            if not (param.is_flag or param.count):
                break  # the rest of the token is its value
        return found


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="sqlanon")
@click.option("-v", "--verbose", count=True, help="Log progress to stderr (-vv for debug).")
@click.option("--debug", is_flag=True, help="Show the full traceback of an error.")
@click.pass_context
def main(ctx: click.Context, verbose: int, debug: bool) -> None:
    """Publish k-anonymous and l-diverse copies of tables (distributed Mondrian).

    \b
    Example:
      sqlanon anonymize examples/adults.csv -o adults_anon.parquet \\
          --qi age,education-num,race,native-country \\
          --hierarchy native-country=hierarchies/countries.json \\
          --sensitive income -k 10 -l 2 --overwrite
      sqlanon verify adults_anon.parquet --qi age,education-num,race,native-country \\
          --sensitive income -k 10 -l 2
    """
    if sys.stderr is None:  # started with stderr closed (2>&-): nowhere to say anything, but the run goes on
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the process's own stderr, for its lifetime
    _raise_open_file_limit()
    handler = _LogHandler(sys.stderr)
    handler.setFormatter(_LogFormat("%(asctime)s %(name)s %(levelname)s %(message)s"))
    handler.addFilter(_cluster_errors_left_to_the_run)
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    _set_verbosity(None, None, verbose)
    ctx.meta["sqlanon.debug"] = debug


MIN_OPEN_FILES = 64
"""Open files a run needs at the least (its workers' pipes, DuckDB's files,
the fork server's): below, a run failed half-way with 'Too many open
files', the fork server printing a traceback."""


def _open_file_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _raise_open_file_limit() -> None:
    """Raise a low soft limit on open files (``ulimit -Sn``) as far as the
    hard one allows, up to 1024. A run refuses to start below
    :data:`MIN_OPEN_FILES` (exit 1: the machine's setting, not the job's)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= 1024:
        return
    want = 1024 if hard == resource.RLIM_INFINITY else min(hard, 1024)
    if want > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _check_open_file_limit() -> None:
    if _open_file_limit() < MIN_OPEN_FILES:  # (run_job's caller gets it raised: helper-53)
        raise InputError(f"the limit on open files (ulimit -n) is {_open_file_limit()}: sqlanon needs at least "
                         f"{MIN_OPEN_FILES}; raise it")


def _cluster_errors_left_to_the_run(record: logging.LogRecord) -> bool:
    """Without -v, Dask's and Spark's (py4j's) own errors are not shown: a
    failed task came out as an empty 'Error:' line or a 'Compute Failed'
    traceback before the run's one-line error, which names the fragment and
    the reason. Dask's event loop is tornado's: a Ctrl-C that closed the
    cluster's connections under a pending call logged 'Exception in callback
    … CommClosedError' under the CLI's one line (about one run in six).
    While a cluster is torn down after a failure or a stop
    (:data:`executors.TEARING_DOWN`), and once the run has failed
    (:data:`_REPORTED`), their warnings go too: a worker killed
    mid-handshake made the scheduler warn under that line, and a nanny said
    'exit status was already read' after the cluster had closed."""
    if logging.getLogger().isEnabledFor(logging.INFO) or record.levelno < logging.WARNING:
        return True
    # By logger, or by file: py4j logs a Ctrl-C through the root logger.
    theirs = ("distributed", "tornado", "py4j", "pyspark")
    if not (record.name.startswith(theirs) or any(f"{os.sep}{p}{os.sep}" in record.pathname for p in theirs)):
        return True
    return record.levelno < logging.ERROR and not executors.TEARING_DOWN.is_set() and not _REPORTED.is_set()


_REPORTED = threading.Event()
"""Set when the CLI's run has failed (its one line follows): no cluster
library's record is shown after it (without -v)."""
_TOLD_PUBLISHED = threading.Event()
"""The command said that a signal came once publishing had begun."""


class _LogHandler(logging.StreamHandler):
    """Log lines on stderr, each on a line of its own: after an open
    progress line too ('reading statistics...Warning: …')."""

    def emit(self, record: logging.LogRecord) -> None:
        _end_progress_line()
        super().emit(record)


class _LogFormat(logging.Formatter):
    """Without -v a warning reads as ``Warning: …``, as errors read ``Error: …``;
    with -v every line is a timestamped log line."""

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno >= logging.WARNING and record.name.startswith("sqlanon"):
            # A value of the --config file named by its key, as its errors are
            # ("'retries' in 'job.yml' applies to Dask and Spark", helper-149).
            message = record.getMessage()
            named = _config_keys_named(message)
            if named != message:
                record = logging.makeLogRecord({**record.__dict__, "msg": named, "args": ()})
        if not logging.getLogger().isEnabledFor(logging.INFO):
            return plain_log_line(record.levelname, record.getMessage())
        return redact_urls(super().format(record))


def _job_warnings(record: logging.LogRecord) -> bool:
    """In :func:`run_job` and :func:`verify_job`, a warning about a value of
    the job file names its key and the file, as the command's does
    (:class:`_LogFormat`): the host's log said ``--retries applies to Dask
    and Spark`` of a job file's ``retries: 5``, a flag nobody passed. A
    filter: it keeps every record."""
    if record.levelno >= logging.WARNING and record.name.startswith("sqlanon"):
        ctx = click.get_current_context(silent=True)
        if _library(ctx):
            message = record.getMessage()
            named = _config_keys_named(message)
            if named != message:
                record.msg, record.args = named, ()
    return True


for _name in LOGGERS:  # beside errors._library_warnings, which names a flag as the argument
    logging.getLogger(_name).addFilter(_job_warnings)


def _set_verbosity(ctx, param, verbose: int) -> None:
    """``-v`` logs progress (INFO), ``-vv`` debug, before or after the command name
    (:func:`run_job`: sqlanon's loggers only, for the run: the host's root
    logger stayed at DEBUG after it, helper-53)."""
    if verbose:
        logger = logging.getLogger("sqlanon" if _library(ctx) else None)
        logger.setLevel(logging.INFO if verbose == 1 else logging.DEBUG)


def verbose_option(help: str):
    """``-v``/``-vv``, with what the command logs."""
    return click.option("-v", "--verbose", count=True, expose_value=False, callback=_set_verbosity, help=help)


def _privacy_hint(key: str) -> str:
    """'k' for ``k_anon``, ``kanonymity``…, 'l' for ``l-diversity``, ``ldiv``…:
    too far from one letter for :func:`suggest`."""
    key = key.lower()
    for letter, word in (("k", "anon"), ("l", "div")):
        if re.match(rf"{letter}(?![a-z])", key) or word in key:
            return f" (did you mean {letter!r}?)"
    return ""


class _ConfigFileError(_OneLine):
    """A bad --config file: a usage error (exit 2) of one line, without
    click's usage banner (the file, not the command line, is at fault)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key written twice in one mapping
    (plain YAML keeps the last one, silently), with YAML 1.2's plain
    scalars: PyYAML's YAML 1.1 read ``k: 010`` as 8 (octal), ``k: 1:30``
    as 90 (base 60). Numbers are decimal (``010`` is text, refused where a
    number goes); booleans are YAML 1.1's (``true``, ``yes``, ``on``…);
    merge keys (``<<: {k: 10}``) work."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self._flattened: set[int] = set()
        self._flattening: set[int] = set()  # (a merge of one of them: its own mapping's, in a cycle)

    def flatten_mapping(self, node) -> None:
        """Each mapping's own keys checked, merged ones too (a key twice in
        a merged mapping, or two merge keys, took the last value silently:
        ``<<: {k: 10, k: 2}`` published k = 2; helper-86), then merged here,
        not by PyYAML: the mapping's own keys win, of a list of merged
        mappings the first, and a key merged again is left out, so that
        merges of merges of aliases, tenfold a level, stay as small as
        their keys (PyYAML 6.0.3 kept every copy: a 626-byte job file took
        six minutes and 1.7 GB to load; helper-86). PyYAML 6.0.4 left out
        a merged key only when it was the same string object, which
        CPython shares for one-letter names only: ``<<: [{k: 9}, {k: 4}]``
        gave k = 9, the same with ``workers`` the last one (helper-196)."""
        if id(node) in self._flattened:  # an alias's mapping, flattened already
            return
        self._flattened.add(id(node))
        self._flattening.add(id(node))
        seen: set = set()
        merges = 0
        own, merged = [], []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merges += 1
                if merges > 1:
                    raise yaml.constructor.ConstructorError(None, None, "the merge key '<<' appears twice",
                                                            key_node.start_mark)
                for sub in (value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]):
                    if not isinstance(sub, yaml.MappingNode):
                        raise yaml.constructor.ConstructorError(
                            None, None, f"a merge key '<<' takes a mapping or a list of them, not a {sub.id}",
                            sub.start_mark)
                    if id(sub) in self._flattening:  # 'could not determine a constructor' (helper-198)
                        raise yaml.constructor.ConstructorError(
                            None, None, "a merge key '<<' merges a mapping that holds it", sub.start_mark)
                    self.flatten_mapping(sub)
                    merged.extend(sub.value)
                continue
            if key_node.tag == "tag:yaml.org,2002:value":  # '=' as a key (YAML 1.1's value key): text
                key_node.tag = "tag:yaml.org,2002:str"
            key = self._key(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice", key_node.start_mark
                )
            seen.add(key)
            own.append((key_node, value_node))
        if merges:
            first = []
            for key_node, value_node in merged:
                key = self._key(key_node)
                if key not in seen:
                    seen.add(key)
                    first.append((key_node, value_node))
            node.value = first + own
        self._flattening.discard(id(node))

    def _key(self, key_node):
        """A mapping key as it names a column or setting: as written (1.1
        and 1.10 two; helper-189)."""
        key = self.construct_object(key_node)
        if isinstance(key, (list, dict)):  # '[a, b]: 1' (unhashable: a TypeError traceback)
            raise yaml.constructor.ConstructorError(
                None, None, "a key must be a name, not a list or mapping", key_node.start_mark
            )
        return getattr(key, "text", key)


def _construct_mapping(loader, node, deep: bool = False) -> dict:
    """A mapping whose number keys are their text: 1.1 and 1.10 name two
    columns (as numbers, one key: the second's value given the first's
    column, exit 0: helper-192)."""
    loader.flatten_mapping(node)
    mapping = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        mapping[getattr(key, "text", key)] = loader.construct_object(value_node, deep=deep)
    return mapping


_UniqueKeyLoader.construct_mapping = _construct_mapping


_YAML_1_1 = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
             "tag:yaml.org,2002:timestamp"}
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _YAML_1_1]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_UniqueKeyLoader.add_implicit_resolver(  # YAML 1.1's words too: 'overwrite: yes' is common, and never a number
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$"),
    list("yYnNtTfFoO"))
_YAML_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$")
_YAML_FLOAT = re.compile(r"^(?:[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?=[eE]))(?:[eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:int", _YAML_INT, list("-+0123456789"))
_UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_FLOAT, list("-+0123456789."))


class _YamlInt(int):
    """A YAML whole number that remembers how it was written (:attr:`text`)."""

    text: str


class _YamlFloat(float):
    """A YAML number with a point or an exponent that remembers how it was written (:attr:`text`)."""

    text: str


def _yaml_1_2_number(tag: str, *patterns: re.Pattern):
    """The constructor of a number, plain or an explicit ``!!int`` /
    ``!!float``, by YAML 1.2's decimal forms: PyYAML's read ``k: !!int
    "010"`` as 8 (octal), ``0x0A`` as 10 (helper-60), where the plain ``k:
    010`` is refused. It keeps its text: a number is a column name, a path
    or a table name where one goes (``drop: [1.10]`` dropped the column
    '1.1', and published '1.10' raw: helper-188)."""
    def construct(loader, node):
        value = loader.construct_scalar(node)
        if not isinstance(value, str) or not any(p.match(value) for p in patterns):
            raise yaml.constructor.ConstructorError(
                None, None, f"!!{tag} {value!r} is not a plain decimal number, which YAML 1.1 and 1.2 read alike "
                "(010 is 8 to one, 10 to the other): write it as one", node.start_mark)
        number = yaml.SafeLoader.yaml_constructors[f"tag:yaml.org,2002:{tag}"](loader, node)
        kept = (_YamlInt if isinstance(number, int) else _YamlFloat)(number)
        kept.text = value
        return kept
    return construct


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _yaml_1_2_number("int", _YAML_INT))
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _yaml_1_2_number("float", _YAML_FLOAT, _YAML_INT))


def _load_config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--config job.yml``: every option of the command, as YAML keys.

    Values become the command's defaults, so flags given on the command line
    override them. Relative paths are relative to the YAML file. A value of
    the wrong kind (``k: 4.9``, ``qi:`` left empty, a list where one value
    goes) and one option given twice (``o`` and ``output``) are errors naming the key.
    """
    if not value or ctx.meta.get("sqlanon.help"):
        return value
    try:
        with open(value, encoding="utf-8") as fh:
            data = yaml.load(fh, Loader=_UniqueKeyLoader)
    except OSError as exc:
        raise _ConfigFileError(f"cannot read {value!r}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise _ConfigFileError(f"{value!r} is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except yaml.YAMLError as exc:
        raise _ConfigFileError(f"{value!r} is not valid YAML: {' '.join(str(exc).split())}") from exc
    if data is None:  # empty, or comments only: a broken deploy's file (helper-100)
        ctx.meta["sqlanon.config_empty"] = value
        data = {}
    if not isinstance(data, dict):
        raise _ConfigFileError(f"{value!r} must hold a mapping of option names to values")
    keys: dict[str, click.Parameter] = {}
    for p in ctx.command.params:
        if p.name in FLAGS_ONLY:
            continue
        for opt in p.opts:  # not p.name: 'l_' and 'as_json' are the code's names, not the option's
            keys[opt.lstrip("-").replace("-", "_")] = p
    base = os.path.dirname(os.path.abspath(value))
    defaults: dict[str, object] = {}
    given: dict[str, object] = {}
    for key, val in data.items():
        if not isinstance(key, str):  # '~: x', '5: x'
            raise _ConfigFileError(f"{value!r} has the key {key!r}: keys are option names")
        p = keys.get(key.replace("-", "_"))
        if p is None:
            if str(key) in FLAGS_ONLY:
                raise _ConfigFileError(f"{key!r} in {value!r} is a command-line flag only: pass --{key} instead")
            flag = re.sub(r"^no[-_]", "", key)
            if flag != key and getattr(keys.get(flag.replace("-", "_")), "is_flag", False):
                # A flag's off-switch (--no-overwrite): 'overwrite' was its hint, the opposite (helper-86).
                raise _ConfigFileError(f"unknown key {key!r} in {value!r}: write {flag}: false")
            hint = suggest(str(key), sorted(k.replace("_", "-") for k in keys)) or _privacy_hint(str(key))
            raise _ConfigFileError(f"unknown key {key!r} in {value!r}{hint}")
        if p.name in given:
            raise _ConfigFileError(f"{given[p.name]!r} and {key!r} in {value!r} are the same option")
        given[p.name] = key
        try:
            defaults[p.name] = _config_value(p, val, base)
        except ValueError as exc:
            raise _ConfigFileError(f"{key!r} in {value!r} {exc}") from None
        if isinstance(defaults[p.name], dict):  # a column mapping: the option's default is its COL=VALUE text
            ctx.meta.setdefault("sqlanon.config_pairs", {})[p.name] = defaults[p.name]
            defaults[p.name] = tuple(f"{c}={v}" for c, v in defaults[p.name].items())
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    ctx.meta["sqlanon.config"] = value
    ctx.meta["sqlanon.config_keys"] = given
    return value


def _load_job_for_verify(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``verify --config job.yml``: the anonymize job's published output
    (``output``, ``target_table``) and what it protects (``qi``,
    ``sensitive``, ``k``, ``l``), read and checked as ``anonymize --config``
    reads the file (its other keys are the job's, not verify's). A nightly
    check repeated the job's QIs, k and l by hand, copies that drift (helper-42)."""
    if not value or ctx.meta.get("sqlanon.help"):
        return value
    job = click.Context(anonymize, info_name="anonymize", parent=ctx.parent)
    job.meta["sqlanon.help"] = False
    _load_config(job, param, value)
    read = job.default_map or {}
    keys = job.meta.get("sqlanon.config_keys", {})
    mapped = {"input": "output", "table": "target_table", "qi": "qi", "k": "k", "l_": "l_", "sensitive": "sensitive"}
    ctx.default_map = {**(ctx.default_map or {}), **{ours: read[theirs] for ours, theirs in mapped.items()
                                                     if theirs in read}}
    ctx.meta["sqlanon.config"] = value
    ctx.meta["sqlanon.config_keys"] = {ours: keys[theirs] for ours, theirs in mapped.items() if theirs in keys}
    return value


def _require(ctx: click.Context, *options: tuple[str, str, object], job: str = "a --config job file") -> None:
    """Refuse a run missing any of ``options`` (``(shown name, job file key,
    value)``), naming them all at once with their job file keys: one per try
    made a newcomer run it four times (helper-42)."""
    missing = [(name, key) for name, key, value in options if value is None or value == () or value == ""]
    if missing:
        names = ", ".join(f"'{name}'" for name, _ in missing)
        keys = ", ".join(f"{key}:" for _, key in missing)
        empty = ctx.meta.get("sqlanon.config_empty")
        raise click.UsageError(f"Missing {names} (give {'it' if len(missing) == 1 else 'them'} on the command "
                               f"line, or as {keys} in {job})" + (f"; {empty!r} sets nothing: it is empty" if empty
                                                                   else "") + ".", ctx)


PATH_KEYS = {"input", "output", "metrics"}
FLAGS_ONLY = ("config", "debug", "help", "explain")
"""Options a job file may not hold: ``explain: true`` left in a nightly job
published nothing, every night, with exit 0 (helper-42)."""


class _Shown(reprlib.Repr):
    def repr_str(self, x: str, level: int) -> str:
        # Masked before it is shortened: a cut URL lost its '@', and with it the mask (helper-51).
        return super().repr_str(redact_urls(x), level)


_SHOWN = _Shown()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict, _SHOWN.maxstring, _SHOWN.maxother = 2, 4, 4, 60, 60


def _shown(val) -> str:
    """A YAML value, shortened for a message: aliases of aliases ('billion
    laughs') made a 368-byte job file's error 580 MB and 2.8 GB to build."""
    return _SHOWN.repr(val)


def _scalar(val, what: str = "a value") -> str:
    """A YAML scalar as option text, a number as it was written (a column may be named 2020, or 1.10)."""
    if val is None or isinstance(val, (bool, list, dict)) or not isinstance(val, (str, int, float)):
        raise ValueError(f"must be {what}, not {_shown(val)}")
    return getattr(val, "text", None) or str(val)


def _joined(base: str, path: str) -> str:
    """A job file's relative ``path`` from its directory ``base``, without the
    ``..`` its messages showed (``/srv/jobs/../lake/``: helper-80) where
    dropping them names the same place: not past a symbolic link, whose
    ``..`` is its target's parent. A trailing ``/`` (``-o out/``, a
    directory) stays."""
    joined = os.path.join(base, path)
    tidy = os.path.normpath(joined) + (os.sep if joined.endswith(os.sep) else "")
    return tidy if os.path.realpath(tidy) == os.path.realpath(joined) else joined


def _config_value(p: click.Parameter, val, base: str):
    """One YAML value as the option's default, checked against what the option takes."""

    def path(x) -> str:
        x = _scalar(x, "a path")
        if not x.strip():  # joined to the file's directory, '' read the job's own directory (helper-29)
            raise ValueError("is empty")
        if x == "-":  # joined to it too: a directory named '-' (-o - is refused: helper-60)
            raise ValueError("is '-': name a file (standard input and output are neither read nor written)")
        if "://" in x or os.path.isabs(x):
            return sqlite_url_from(x, base)
        if p.name == "input" and has_wildcard(x + base) and not os.path.exists(_joined(base, x)):
            # A glob, or a name not there (yet) that DuckDB would read as one: the directory before its first
            # wildcard is no pattern (jobs in team[a]/ read teama/'s files: helper-188, helper-192), its '..'
            # taken as the kernel takes them (helper-190)
            parts = x.split(os.sep)
            wild = next((i for i, part in enumerate(parts) if has_wildcard(part)), len(parts) - 1)
            fixed = physical_path(_joined(base, os.sep.join(parts[:wild]) or "."))
            return os.path.join(glob.escape(fixed), *parts[wild:])
        return _joined(base, x)

    if p.name in ("hierarchy", "generalization"):
        if not isinstance(val, dict):
            raise ValueError(f"must map columns to {'files' if p.name == 'hierarchy' else 'kinds'}, not {_shown(val)}")
        what = "a file" if p.name == "hierarchy" else "a kind"
        # As a mapping (_per_column reads it from ctx.meta): as COL=VALUE
        # text, a column named 'grp=code' was read as 'grp' (helper-29).
        # (1990 and "1990", keys as written, are one key twice to the loader: _UniqueKeyLoader)
        return {_scalar(c, "a column"): path(v) if p.name == "hierarchy" else _scalar(v, what) for c, v in val.items()}
    if getattr(p, "multiple", False):
        items = val if isinstance(val, list) else [val]
        if not items:
            if p.name == "keep":  # as --keep '': no other column may pass
                return ("",)
            if p.name == "qi":
                raise ValueError("must name at least one column")
            return ()  # none, as the library's drop=[] (a job file made from a template: helper-51)
        names = tuple(_scalar(v, "a column name (or a list of them)") for v in items)
        blank = next((i for i, n in enumerate(names, 1) if not n.strip()), None)
        if isinstance(val, list) and blank is not None:  # dropped unsaid: a template's empty "{{ssn}}" (helper-86)
            raise ValueError(f"has an empty column name (item {blank} of its list)")
        return tuple(map(_quoted_item, names)) if isinstance(val, list) else names
    if p.name == "sample":  # a number, as k is and as the library's sample= is: not "1e4" (helper-90)
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            raise ValueError(f"must be a fraction (0.001) or a row count (50000), not {_shown(val)}")
        return str(float(val) if isinstance(val, float) else int(val))  # (.inf: refused as a number, helper-189)
    if getattr(p, "is_flag", False):
        if not isinstance(val, bool):
            raise ValueError(f"must be true or false, not {_shown(val)}")
        return val
    if isinstance(p.type, (click.types.IntParamType, click.IntRange)):
        if isinstance(val, bool) or not isinstance(val, int):
            raise ValueError(f"must be a whole number, not {getattr(val, 'text', None) or _shown(val)}")
        return int(val)
    if isinstance(p.type, click.types.FloatParamType):
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            raise ValueError(f"must be a number, not {_shown(val)}")
        try:
            return float(val)
        except OverflowError:  # a whole number past a float's range: click's traceback (helper-86)
            raise ValueError(f"must be a number a float can hold, not {_shown(val)}") from None
    if isinstance(val, str) and not val.strip():  # table: "" was blamed on --table (helper-51)
        raise ValueError("is empty")
    if p.name in PATH_KEYS:
        if p.name == "metrics" and not file_format(_scalar(val)):
            return _scalar(val)  # a table name in the output database, not a path
        return path(val)
    return _scalar(val)


class _ProgressLine:
    """The progress line on a terminal's stderr: the run's step, and a bar of
    finished fragments once they run."""

    width = 30

    def __init__(self) -> None:
        self._bar = ""
        self._step = ""

    def fragments(self, finished: int, total: int) -> None:
        bar = "#" * (self.width * finished // max(total, 1))
        self._bar = f"[{bar:<{self.width}}] {finished}/{total} fragments"
        self._draw()

    def status(self, step: str) -> None:
        self._step = f"{step}..."
        self._draw()

    def done(self) -> None:
        """The run is over: the bar alone stays on the screen."""
        self._step = ""
        if self._bar:
            self._draw()
        _end_progress_line()

    def _draw(self) -> None:
        text = " | ".join(part for part in (self._bar, self._step) if part)
        try:  # one row of the terminal: a longer line wraps, and \r returns to its last row only
            columns = os.get_terminal_size(sys.stderr.fileno()).columns or 80  # 0: a terminal that says nothing
        except (OSError, ValueError, AttributeError):
            columns = 80
        click.echo(f"\r\x1b[K{text[:max(columns - 1, 1)]}", err=True, nl=False)  # \x1b[K: erase what was longer
        _progress_line_open[0] = True


def _progress(quiet: bool) -> _ProgressLine | None:
    """The progress line, on a terminal's stderr only.

    Not on a pipe or a log file: there ``-v`` logs each fragment instead, and
    stderr stays the one-line ``Error:`` channel for scripts.
    """
    if quiet or not sys.stderr.isatty() or logging.getLogger().isEnabledFor(logging.INFO):
        return None  # -v logs each fragment: a bar would be cut by the log lines
    return _ProgressLine()


_progress_line_open = [False]
"""Whether the progress bar's line waits for its end (an error then starts a line of its own)."""


def _end_progress_line() -> None:
    if _progress_line_open[0]:
        click.echo("", err=True)
        _progress_line_open[0] = False


def _sample(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        if "_" in value:  # Python's float() takes 1_000; the library's sample= takes no such text
            raise ValueError(value)
        return float(value)  # 1000.0 is taken as 1000 rows, as the library's sample= (api._rows_or_fraction)
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither a fraction nor a row count", param_hint="--sample") from None


@main.command(cls=_Command)
@click.option(
    "--config", type=click.Path(dir_okay=False), is_eager=True, expose_value=False, callback=_load_config,
    help="YAML file with any of these options as keys (e.g. qi: [age, zip]); its relative paths are relative to "
         "it (no ~ or $VAR expansion). Flags override it, except that --drop and --keep add to its lists, --qi and "
         "--sensitive may not leave its columns out, -k and -l may not lower its k and l, and "
         "--hierarchy/--generalization change only the columns they name.",
)
@click.argument("input", metavar="INPUT", required=False)
@click.option(
    "-o", "--output",
    help="Output: a .parquet/.csv/.tsv file (.csv.gz, .csv.zst: compressed), a directory of Parquet parts (a name "
    "ending in / or without an extension), a .duckdb file or a postgresql:// URL. [required: here or in --config]",
)
@click.option(
    "--table",
    help="Source table when INPUT is a DuckDB file or a database URL ([schema.]table; without a schema: DuckDB's "
    "main, PostgreSQL's search_path).",
)
@click.option(
    "--target-table",
    help="Output table when OUTPUT is a DuckDB file or a database URL ([schema.]table, as --table; a new "
    "PostgreSQL table goes where CREATE TABLE would put it).",
)
@click.option("--qi", "qi", multiple=True,
              help="Quasi-identifier columns, comma-separated or repeated. [required: here or in --config]")
@click.option("-k", type=int,
              help="Every equivalence class has at least k rows (k >= 2). [required: here or in --config]")
@click.option("-l", "l_", type=int, default=1, show_default=True,
              help="Every equivalence class holds at least l distinct values of each sensitive column.")
@click.option("--sensitive", multiple=True, help="Sensitive columns, comma-separated or repeated (needed for -l > 1).")
@click.option(
    "--hierarchy", multiple=True, metavar="COL=FILE",
    help=("Generalization hierarchy of a QI column: a JSON tree {\"cat\": name, \"subcats\": [...]} or ARX-style "
          "CSV levels (one row per leaf: value;level1;level2;...). Repeat it for each column; a column "
          "named with '=' in double quotes: '\"grp=code\"=FILE'."),
)
@click.option(
    "--generalization", multiple=True, metavar="COL=KIND",
    help=f"How to generalize a QI: {', '.join(GENERALIZATIONS)}. Default: hierarchy if given, "
    "interval for numbers and dates, set otherwise. Repeat it for each column, or comma-separate them "
    "(age=interval,zip=prefix; a name holding a comma takes a flag of its own, in double quotes with "
    "an '=': '\"grp=code\"=set').",
)
@click.option("--drop", multiple=True,
              help="Columns to remove from the output (direct identifiers), comma-separated or repeated.")
@click.option(
    "--keep", multiple=True,
    help="Columns to publish unchanged, comma-separated or repeated: with it, every other column must be a QI, "
         "sensitive or dropped, or the run is refused (a column new in the input is not published raw). "
         "Default: all others.",
)
@click.option(
    "--date-order", type=click.Choice(["DMY", "MDY"], case_sensitive=False),
    help="How a CSV input writes numeric dates such as 01/02/2020: day first (DMY) or month first (MDY). "
         "Default: DuckDB's guess, refused when the values read both ways.",
)
@click.option(
    "--encoding", type=click.Choice(["utf-8", "latin-1", "utf-16"], case_sensitive=False),
    help="The text encoding of a CSV input (default: utf-8); a file that is not such text is refused by its line.",
)
@click.option(
    "--interval-format", type=click.Choice(INTERVAL_FORMATS), default="text", show_default=True,
    help="text: '[lo, hi]'; bounds: typed columns COL_lo and COL_hi.",
)
@click.option("--workers", type=int, help="Worker processes (default: CPU count; 1 runs in this process).")
@click.option("--fragments", type=int,
              help="Fragments to cut the data into (default: --workers, which follows the CPU count, or a "
                   "multiple of it where a table would not fit the workers' memory in one fragment each: pin it for "
                   "the same plan on every host and night).")
@click.option(
    "--fragmentation", type=click.Choice(STRATEGIES), default="mondrian", show_default=True,
    help="mondrian: recursive cuts of the sample, each on the QI whose values span the largest share of its "
         "range (paper Fig. 5); quantile: --fragments quantiles of the QI with most distinct values (Fig. 4).",
)
@click.option(
    "--sample",
    help="Sample for planning: a fraction (0.001) or a row count (50000). "
    "Default: 2,000 rows per fragment, at least 20,000, at most 16 MiB of QI values.",
)
@click.option(
    "--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True,
    help="Seed of the sample (reproducible plans).",
)
@click.option("--worker-memory",
              help="DuckDB memory limit per worker, at least 64MiB, e.g. 2GB (default: 80% of RAM / workers).")
@click.option(
    "--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
    help="Where workers run: a local process pool, Dask distributed or Spark (sqlanon's extras dask and spark: "
    "pip install -e '.[dask]' in its checkout).",
)
@click.option("--scheduler", help="Dask scheduler address, e.g. tcp://host:8786 (default: a local cluster).")
@click.option(
    "--spark-master",
    help="Spark master URL (default: local[WORKERS,RETRIES+1]; a notebook's active session is used as it is).",
)
@click.option("--retries", type=int,
              help="Reruns of a failed task on Dask or Spark, 0 to 100 (default: 2; the local pool reruns none).")
@click.option("--task-timeout", type=float, help="Seconds one fragment may take before the run fails (default: no limit).")
@click.option("--metrics", help="Metrics to append to: a .parquet/.csv file (.pq, .tsv, .csv.gz/.zst too), or a "
                                "table when OUTPUT is a database "
                                "(default: OUTPUT without its extension + __metrics.parquet, or TABLE__metrics). "
                                "Its plan holds values of the input: keep it from the output's readers.")
@click.option("--explain", is_flag=True,
              help="Print the plan as JSON (fragments, WHERE clauses, sizes) and write nothing. The run's checks "
                   "apply as they would: an existing output (a file, or a database table) needs --overwrite, which "
                   "--explain does not write to.")
@click.option(
    "--overwrite/--no-overwrite", default=False,
    help="Replace an existing output (only once the new one is verified). Default: refuse to.",
)
@click.option("--json/--no-json", "as_json", default=False,
              help="Print the run's metrics and timings as one JSON object.")
@click.option("-q", "--quiet/--no-quiet", default=False, help="No progress on stderr.")
@debug_option
@verbose_option("Log progress to stderr, each fragment instead of the bar (-vv for debug).")
@click.pass_context
@handle_errors
def anonymize(
    ctx, input, output, table, target_table, date_order, encoding, qi, k, l_, sensitive, hierarchy, generalization,
    drop, keep, interval_format,
    workers, fragments, fragmentation, sample, seed, worker_memory, executor, scheduler, spark_master, retries,
    task_timeout, metrics, explain, overwrite, as_json, quiet,
):
    """Anonymize INPUT into the output -o OUTPUT with distributed Mondrian.

    INPUT is a Parquet/CSV/TSV file (.csv.gz, .csv.zst too), a glob, a
    directory of part files, a DuckDB file with --table, or a database URL
    with --table: postgresql://…, or
    any other SQLAlchemy URL (sqlite:///hr.db, mysql+pymysql://…; input
    only, with that database's driver installed). The coordinator reads
    statistics and a sample through SQL, cuts the data into fragments
    described by WHERE clauses, and worker processes each pull and anonymize
    one fragment. Non-QI columns pass through unchanged. The output is verified with SQL (k and l per
    class) before it is swapped in; on any error nothing is published and an
    existing output is left as it was. A metrics table (one row per fragment
    and a total) is appended next to the output.

    Exit codes: 0 published, 1 the run failed (nothing published), 2 a usage
    or configuration error, 130 interrupted, 143 terminated (SIGTERM), 129
    the terminal hung up (SIGHUP).
    """
    _require(ctx, ("INPUT", "input", input), ("-o", "output", output), ("--qi", "qi", qi), ("-k", "k", k))
    if output.startswith("=") and ctx.get_parameter_source("output") is click.core.ParameterSource.COMMANDLINE:
        # click reads -o=x as the file '=x' (helper-188); --output=x is x
        raise click.UsageError(f"-o takes the path after a space: {output!r} was read as the output's name "
                               f"(write -o {output[1:] or 'PATH'}, or -o ./{output} for a file of that name)", ctx)
    table, target_table, metrics = _job_tables_left(ctx, input, output, table, target_table, metrics)
    library = _library(ctx)
    _check_open_file_limit()
    if executor == "local" and not library and not executors.in_process(executor, workers, explain):
        executors.start_local_server()
    if not quiet and not library and sys.stderr.isatty():
        from . import kernel

        if kernel.needs_build():  # the first run on a machine waits for it: say why
            click.echo("Compiling the Mondrian kernel once (10-25 s, longer on a busy machine; later runs reuse it)...",
                       err=True)
    finished = False
    line = None if (explain or as_json or library) else _progress(quiet)
    try:
        from . import api

        result = api.anonymize.with_flags(
            input,
            output,
            qi=_covering(ctx, "qi", qi, "which would then be published unchanged"),
            k=_not_below_file(ctx, "k", "-k", k),
            l=_not_below_file(ctx, "l_", "-l", l_),
            sensitive=_covering(ctx, "sensitive", sensitive, "which would then go unchecked for l"),
            hierarchies=_merged(ctx, "hierarchy", hierarchy, "generalization", generalization,
                                lambda kind: kind != "hierarchy"),
            generalization=_merged(ctx, "generalization", generalization, "hierarchy", hierarchy, lambda path: True),
            drop=_adding(ctx, "drop", drop),
            keep=_adding(ctx, "keep", keep) if keep else None,
            overwrite=overwrite,
            interval_format=interval_format,
            table=table,
            target_table=target_table,
            workers=workers,
            fragments=fragments,
            fragmentation=fragmentation,
            sample=_sample(sample),
            seed=seed,
            worker_memory=worker_memory,
            metrics=metrics,
            explain=explain,
            progress=line and line.fragments,
            status=line and line.status,
            executor=executor,
            scheduler=scheduler,
            spark_master=spark_master,
            retries=retries,
            task_timeout=task_timeout,
            date_order=date_order and date_order.upper(),
            encoding=encoding and encoding.lower(),
        )
        finished = True
        if line is not None:
            line.done()
        if interrupts.received() and not library:  # during publishing, which runs to its end
            click.echo(_published_first(interrupts.received_signal()), err=True)
            _TOLD_PUBLISHED.set()
    finally:
        if not finished:
            # The run failed, perhaps before the fork server had even loaded:
            # stop it now rather than let it hold our stdout/stderr a second more.
            executors.stop_local_server()
    if library:
        return result
    if explain:
        click.echo(strict_json(result.explain(), indent=None if as_json else 2))
        return
    if as_json:
        _report(strict_json(result.to_dict()))
        return
    m = result.metrics
    _report(
        # GCP to 4 significant digits: 0.0000 read as "no information lost" (2e-5 here, helper-42).
        f"wrote {result.output}: {m.rows} rows in {m.classes} classes (min size {m.min_class_size}), "
        f"k={m.k} l={m.l} verified, DP={m.dp}, NCP={m.ncp:.6g}, GCP={m.gcp:.4g}; "
        f"{_count(len(result.plan.fragments), 'fragment')} on {_count(result.workers, 'worker')}, "
        f"{result.timings['total']:.2f}s; "
        + (f"metrics in {result.metrics_location}" if result.metrics_location else "metrics not written (above)")
    )


def _holds_tables(path: str) -> bool:
    """Whether ``path`` names a database (a URL, a DuckDB file by its suffix,
    not a directory, or an existing file of no data format), whose tables
    ``--table`` and ``--target-table`` name: a job's table goes with the
    database, not with a file or lake named on the command line."""
    from .io import DUCKDB_SUFFIXES  # here: it imports DuckDB, which the CLI loads later

    return ("://" in path or (path.lower().endswith(DUCKDB_SUFFIXES) and not os.path.isdir(path))
            or (file_format(path) is None and os.path.isfile(path)))


def _job_tables_left(ctx: click.Context, input, output, table, target_table, metrics):
    """A job file's ``table`` (``target_table``, and a ``metrics`` table)
    names a table of the job's input (output) database: an INPUT (``-o``)
    on the command line that is a file or a lake replaces that database, and
    the file's table with it, as ``verify --config`` takes a file named on
    its command line. A backfill to a Parquet file of a job writing a table
    was refused ("'target_table' in 'job.yml' writes into a DuckDB file"),
    with no flag to unset it (helper-149)."""
    from_job, typed = click.core.ParameterSource.DEFAULT_MAP, click.core.ParameterSource.COMMANDLINE
    if (ctx.get_parameter_source("input") is typed and ctx.get_parameter_source("table") is from_job
            and not _holds_tables(input)):
        table = None
    if (ctx.get_parameter_source("output") is typed and ctx.get_parameter_source("target_table") is from_job
            and not _holds_tables(output)):
        target_table = None
        if ctx.get_parameter_source("metrics") is from_job and metrics is not None and file_format(metrics) is None:
            metrics = None  # a table of the job's output database: the run's metrics go next to -o's output
    return table, target_table, metrics


def run_job(config: str | os.PathLike, *args: str | os.PathLike | int | float) -> RunResult:
    """``sqlanon anonymize --config CONFIG [ARGS]`` as a library call: the
    job file read and checked as the command reads it (relative paths
    relative to it, unknown keys refused), ``args`` the command line's
    flags (``"--seed", "3"``; they override the file as they do there:
    never weaker), and the run's :class:`~sqlanon.RunResult` returned. A
    failure raises the library's error (:class:`~sqlanon.ConfigError` for
    what exit 2 stands for, naming the file's key); nothing is printed."""
    return _as_library(anonymize, "run_job", config, args)


def verify_job(config: str | os.PathLike, *args: str | os.PathLike | int | float) -> Verification:
    """``sqlanon verify --config CONFIG [ARGS]`` as a library call: the job
    file's published output checked for what the job protects (its qi,
    sensitive, k and l), read as the command reads it; ``args`` its flags
    (never weaker than the file), the :class:`~sqlanon.Verification`
    returned (``.ok``), whether it passed or failed; a file or an output
    that cannot be read raises, as :func:`run_job` does, and nothing is
    printed. A scheduler's task that checks a job's output read the file
    itself (helper-122)."""
    return _as_library(verify, "verify_job", config, args)


def _as_library(command: click.Command, name: str, config, args: tuple):
    """``command`` run with ``--config config`` and ``args`` as a library
    call (:func:`run_job`, :func:`verify_job`): its result returned, its
    errors raised, nothing printed."""
    argv = ["--config", _flag_text(config, "config", name)]
    argv += [_flag_text(a, f"flag {i}", name) for i, a in enumerate(args, 1)]
    if any(a in ("-h", "--help") for a in argv[2:]):  # click would print the help, then ask to exit
        raise ConfigError(f"{name}() runs a job: --help is the command line's (sqlanon {command.name} --help)")
    _raise_open_file_limit()  # as the command does
    ours = logging.getLogger("sqlanon")
    level = ours.level  # -v sets it for the run
    try:
        try:
            ctx = command.make_context(f"sqlanon {command.name}", argv, obj=_LIBRARY_RUN)
        except click.UsageError as exc:  # a flag, or a value of the file click checks
            raise ConfigError(_one_line(exc).format_message()) from None
        except click.ClickException as exc:  # the file (_ConfigFileError)
            raise ConfigError(exc.format_message()) from None
        with ctx:
            return command.invoke(ctx)
    finally:
        ours.setLevel(level)


_LIBRARY_RUN = object()
"""The click context's ``obj`` of a :func:`run_job` or :func:`verify_job` call."""


def _library(ctx: click.Context | None) -> bool:
    """Whether ``ctx`` is a :func:`run_job` or :func:`verify_job` call's (errors raised, nothing printed, the
    host's logging kept)."""
    return ctx is not None and ctx.find_root().obj is _LIBRARY_RUN


def _flag_text(value, what: str, name: str) -> str:
    """One of the arguments of :func:`run_job` or :func:`verify_job`
    (``name``) as command-line text: a path, a string, or a number
    (``"--seed", 3``); other values are refused by name (an int was a bare
    TypeError: helper-53)."""
    if isinstance(value, (str, os.PathLike)) and isinstance(os.fspath(value), str):
        return os.fspath(value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))  # numpy's too, as the library takes them (helper-60)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return str(float(value))  # np.float32 too (helper-63)
    raise ConfigError(f"{name}(): {what} must be text, a path or a number, not {type(value).__name__} {value!r}")


def _report(text: str) -> None:
    """A published run's summary on stdout. The output and its metrics are
    published by now: a stdout that is full, closed or gone (its reader left)
    must not make the run exit 1, which tells a scheduler nothing was
    published (a retry would publish again and append the metrics twice)."""
    try:
        if sys.stdout is None:  # started with stdout closed (>&-)
            raise OSError("standard output is closed")
        click.echo(text)
        sys.stdout.flush()
    except BrokenPipeError:
        pass  # its reader left (`| head -c0`): nothing to say, nobody to say it to
    except (OSError, ValueError) as exc:  # ValueError: a closed file
        with contextlib.suppress(OSError, ValueError, AttributeError):
            click.echo(f"Warning: published, but the summary could not be written to standard output "
                       f"({getattr(exc, 'strerror', None) or exc})", err=True)


@main.command(cls=_Command)
@click.option(
    "--config", type=click.Path(dir_okay=False), is_eager=True, expose_value=False, callback=_load_job_for_verify,
    help="An anonymize job file (YAML): check its published output (output, target_table) for what it protects "
         "(qi, sensitive, k, l). Flags override it, but -k and -l may not lower its k and l, nor --qi and "
         "--sensitive leave its columns out.",
)
@click.argument("input", metavar="TABLE_OR_FILE", required=False)
@click.option("--qi", "qi", multiple=True,
              help="Generalized QI columns, comma-separated or repeated (a QI published with --interval-format "
                   "bounds by its name: age means age_lo,age_hi). [required: here or in --config]")
@click.option("-k", type=int, help="Minimum rows per class. [required: here or in --config]")
@click.option("-l", "l_", type=int, default=1, show_default=True, help="Minimum distinct sensitive values per class.")
@click.option("--sensitive", multiple=True, help="Sensitive columns, comma-separated or repeated.")
@click.option("--table", help="The table, when TABLE_OR_FILE is a DuckDB file or a database URL ([schema.]table).")
@click.option("--show", type=click.IntRange(min=0), default=20, show_default=True,
              help="How many violating groups a failed check lists (smallest first).")
@click.option("--json/--no-json", "as_json", default=False, help="Print the result as JSON.")
@click.option("-q", "--quiet/--no-quiet", default=False,
              help="Print nothing when the check passes (the exit code tells); a failed check is still listed.")
@debug_option
@verbose_option("Log the checks' steps to stderr (-vv for debug).")
@handle_errors
def verify(input, qi, k, l_, sensitive, table, show, as_json, quiet):
    """Check that TABLE_OR_FILE is k-anonymous and l-diverse.

    Groups the rows by the QI columns; exits 0 when every group has at least
    k rows and l distinct values of each sensitive column, 1 otherwise (and
    lists the first --show violating groups, their count and the rows in
    them) or when the table cannot be read, 2 on a usage error; 130
    interrupted, 143 terminated (SIGTERM), 129 the terminal hung up.
    """
    from . import api

    ctx = click.get_current_context()
    job = ctx.meta.get("sqlanon.config")
    _require(ctx, ("TABLE_OR_FILE", "output", input), ("--qi", "qi", qi), ("-k", "k", k),
             job=repr(job) if job else "an anonymize job file given to --config")
    from_job = click.core.ParameterSource.DEFAULT_MAP
    if ctx.get_parameter_source("k") is from_job and k < MIN_K:  # a job anonymize refuses has no output to check
        raise click.UsageError(f"{ctx.meta['sqlanon.config_keys']['k']!r} in {job!r} must be an integer >= {MIN_K}, "
                               f"got {k} (anonymize refuses the job)", ctx)
    if ctx.get_parameter_source("table") is from_job and not _holds_tables(input):
        table = None  # the job's target_table, of a database output; not of this file or lake (helper-45, -47)
    # As for anonymize, a flag may make the job's check stricter, not weaker: `-k 2` or `--qi age` passed
    # output the job's own check fails (helper-51).
    qi = _covering(ctx, "qi", qi, "whose classes the check would then not see")
    sensitive = _covering(ctx, "sensitive", sensitive, "which would then go unchecked for l")
    k, l_ = _not_below_file(ctx, "k", "-k", k, least=1), _not_below_file(ctx, "l_", "-l", l_, least=1)
    check = api.verify.with_flags(input, qi=qi, k=k, l=l_, sensitive=sensitive, table=table, show=show)
    if _library(ctx):  # verify_job: the result, passed or failed
        return check
    if as_json:
        click.echo(strict_json(check.to_dict()))
    elif check.ok and not quiet:
        click.echo(
            f"OK: {check.rows} rows in {check.classes} classes, min class size {check.min_class_size}"
            + (f", min distinct sensitive {check.achieved_l}" if check.min_distinct else "")
        )
    elif not check.ok:
        click.echo(f"FAILED: {check.describe_failure(limit=show, lines=True)}")  # the check's result, as OK is: stdout
    sys.exit(0 if check.ok else 1)


def entry(args: list[str] | None = None, prog_name: str | None = None) -> None:
    """The ``sqlanon`` script and ``python -m sqlanon``: :func:`main`, then a
    quick exit.

    Once the command has finished (output published, streams flushed, worker
    pool stopped), the interpreter's own teardown only frees memory: with
    DuckDB, Arrow, numpy and pandas loaded it takes ~0.2 s, a noticeable part
    of a short run (BENCHMARKS.md, section 2). So the exit handlers run (logging,
    multiprocessing, executors, temporary files) and the process then ends
    with ``os._exit``. Threads still running (an executor that did not stop)
    get the normal exit, which waits for them.
    """
    import atexit
    import threading

    # sqlanon makes no BLAS calls, but importing numpy does one (a check of
    # its own), after which OpenBLAS's thread pool spins ~0.1 s of CPU: in the
    # coordinator and in the worker pool's fork server, on the cores the run
    # needs. With one BLAS thread nothing spins. A setting of the user's wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    interrupts.hold_to_exit()  # a signal after a published run's end is recorded, and told below
    try:
        main(args=args, prog_name=prog_name)
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:  # sys.exit("message"), as Python itself reports it
            click.echo(exc.code, err=True)
            code = 1
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon for t in threading.enumerate()):
        sys.exit(code)
    try:
        atexit._run_exitfuncs()
    finally:
        if code == 0 and interrupts.late_signals() and not _TOLD_PUBLISHED.is_set():
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(_published_first(interrupts.late_signals()[0]) + "\n")
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):  # a closed pipe, or no stream at all (>&-)
                pass
        os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
