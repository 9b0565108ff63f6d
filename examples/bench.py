"""Benchmarks behind BENCHMARKS.md.

    python3 -m examples.bench engine [--rows 1000000] [--k 5 10 20] [--repeat 3]
    python3 -m examples.bench pipeline [--rows 1000000] [--repeat 3]
    python3 -m examples.bench big [--rows 10000000] [--fragments 16 4] [--rev REV]
    python3 -m examples.bench postgres [--rows 1000000] [--url postgresql://…] [--repeat 3]
    python3 -m examples.bench executors [--rows 1000000] [--fragments 8]
    python3 -m examples.bench checksums [--rows 1000000] [--url postgresql://…] [--repeat 7]
    python3 -m examples.bench lake [--files 3000] [--rows-per-file 100] [--repeat 5]
    python3 -m examples.bench compare REV [--rows 1000000] [--workers 2] [--repeat 8] [--url postgresql://…]
                                          [--csv | --duckdb] [--fragments N] [--fragmentation quantile] [--zip]
    python3 -m examples.bench hierarchy [--rows 1000000] [--leaves 50000] [--rev REV]
    python3 -m examples.bench prefix REV [--rows 1000000] [--fragments 8] [--repeat 3]
    python3 -m examples.bench wide [--rows 1000000] [--rev REV]
    python3 -m examples.bench bytecode [--rows 1000000] [--repeat 8]

Generated inputs (``poker-<rows>.parquet``…) are kept in ``bench-data/`` at
the top of the checkout, or in ``$SQLANON_BENCH_DATA`` when that is set
(the directory must have an existing parent), and reused by later runs.

``engine``: the Poker Hand data set (examples/poker.py, seed 0) as Parquet,
10 QIs (s1..s5, r1..r5), sensitive ``hand``, l = 2; every run is the real CLI
(``sqlanon anonymize … --json``) in a fresh process, so the timings are the
ones a user sees, and the peak RSS is that process's (sqlanon's bytecode
compiled first, as a wheel's install has it: :func:`compile_bytecode`). The numba kernel is
compiled (and cached on disk) by a warm-up run first; the compile cost is
reported separately. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from examples.poker import write_poker

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("SQLANON_BENCH_DATA", REPO / "bench-data"))
QI = "s1,r1,s2,r2,s3,r3,s4,r4,s5,r5"


def poker_file(rows: int) -> Path:
    """The poker Parquet file of ``rows`` rows, generated once."""
    DATA.mkdir(exist_ok=True)
    path = DATA / f"poker-{rows}.parquet"
    if not path.exists():
        write_poker(path, rows, seed=0)
    return path


def poker_zip_file(rows: int) -> Path:
    """Poker of ``rows`` rows with a ``zip`` column of ~90,000 values
    (uniform in 10,000–99,999, seed 7), generated once: a ``quantile``
    plan cuts the one QI with most values, and poker's hold 13 at most
    (``--fragments 256`` gave 13 fragments)."""
    path = DATA / f"poker-zip-{rows}.parquet"
    if not path.exists():
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pq.read_table(poker_file(rows))
        zips = np.random.default_rng(7).integers(10_000, 100_000, table.num_rows)
        pq.write_table(table.append_column("zip", pa.array(zips)), path)
    return path


def run_cli(args: list[str], tree: str | None = None) -> tuple[dict, float, float]:
    """Run ``sqlanon`` in a child; return its JSON, wall seconds and peak RSS (MiB).

    The JSON gets one key of the bench's own, ``bench_after_output_s``: from
    the moment its line arrived to the end of the output (the process's
    teardown as whoever reads its output sees it).

    ``tree``: run the sqlanon of that source tree (a checkout) instead of the
    installed one. The child runs in that tree, with it first on PYTHONPATH:
    the worker pool's fork server is a fresh ``python -c`` interpreter that
    imports sqlanon by itself (its sys.path starts with the working
    directory; Python 3.11's forkserver ignores the parent's sys.path), and
    would otherwise run another tree's workers.
    """
    # As the `sqlanon` script runs (sqlanon.cli.entry); the peak RSS is
    # printed by an exit handler, which entry runs before it ends the process.
    # (older trees, for `compare`: their click group itself).
    cmd = [sys.executable, "-c", "import atexit, resource, sys\n"
           "try:\n    from sqlanon.cli import entry\nexcept ImportError:\n    from sqlanon.cli import main as entry\n"
           "atexit.register(lambda: print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))\n"
           "entry(sys.argv[1:], 'sqlanon')", *args]
    env = None
    if tree:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))}
    compile_bytecode(Path(tree) / "sqlanon" if tree else None)
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=tree)
        line = proc.stdout.readline()
        t_line = time.perf_counter()
        rest = proc.stdout.read()
        returncode = proc.wait()
        wall = time.perf_counter() - t0
        err.seek(0)
        stderr = err.read()
    if returncode != 0:
        raise SystemExit(f"sqlanon failed: {stderr.strip()}")
    rss_kib = int(stderr.strip().splitlines()[-1])
    doc = json.loads(line + rest)
    doc["bench_after_output_s"] = wall - (t_line - t0)
    return doc, wall, rss_kib / 1024


def compile_bytecode(package: Path | None = None) -> None:
    """Compile sqlanon's modules (the installed package's, or ``package``)
    to bytecode, as pip does when it installs a wheel. An editable install
    under PYTHONDONTWRITEBYTECODE=1 (this machine image's default) has none:
    every process of a run compiled the package again (~0.35 s of CPU each,
    the CLI's and the fork server's), which no installed copy does. Up to
    stop 30 the runs here paid it; a no-op when the bytecode is current."""
    import compileall

    if package is None:
        import sqlanon

        package = Path(sqlanon.__file__).parent
    compileall.compile_dir(str(package), quiet=2)


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def engine(rows: int, ks: list[int], repeat: int) -> None:
    src = poker_file(rows)
    out_dir = Path(tempfile.mkdtemp(prefix="sqlanon-bench-"))
    base = ["anonymize", str(src), "--qi", QI, "--sensitive", "hand", "-l", "2", "--json", "--overwrite",
            "--workers", "1"]  # the engine alone: one fragment, in the CLI's process
    t0 = time.perf_counter()
    run_cli([*base, "-k", "10", "-o", str(out_dir / "warm.parquet")])
    print(f"warm-up run (numba compile on a cold cache, else cached): {time.perf_counter() - t0:.2f} s\n")
    print(f"poker {rows:,} rows, 10 QIs, sensitive hand, l = 2, best of {repeat}; {machine()}\n")
    print("| k | anonymize s | read s | write s | verify s | total s | wall s | peak RSS MiB | classes | DP | NCP |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in ks:
        runs = [run_cli([*base, "-k", str(k), "-o", str(out_dir / f"k{k}.parquet")]) for _ in range(repeat)]
        doc, wall, rss = min(runs, key=lambda r: r[0]["timings"]["anonymize"])
        t = doc["timings"]
        print(
            f"| {k} | {t['anonymize']:.3f} | {t['read']:.3f} | {t['write']:.3f} | {t['verify']:.3f} | "
            f"{t['total']:.3f} | {wall:.2f} | {rss:.0f} | {doc['classes']:,} | {doc['dp']:.4g} | {doc['ncp']:.4g} |"
        )


def copy_baseline(src: Path, out: Path) -> float:
    """Wall time of a plain DuckDB copy of ``src``, interpreter start included."""
    code = (
        "import duckdb, sys; duckdb.sql(\"COPY (SELECT * FROM read_parquet('\" + sys.argv[1] + \"')) "
        "TO '\" + sys.argv[2] + \"' (FORMAT parquet)\")"
    )
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(src), str(out)], check=True)
    return time.perf_counter() - t0


def pipeline(rows: int, repeat: int) -> None:
    src = poker_file(rows)
    out_dir = Path(tempfile.mkdtemp(prefix="sqlanon-bench-"))
    base = ["anonymize", str(src), "--qi", QI, "--sensitive", "hand", "-k", "10", "-l", "2", "--json", "--overwrite"]
    run_cli([*base, "-o", str(out_dir / "warm.parquet"), "--workers", "2"])  # numba cache warm
    print(f"poker {rows:,} rows as Parquet, 10 QIs, sensitive hand, k = 10, l = 2; {machine()}\n")
    print("End to end (CLI start to published output and metrics), best of", repeat, "\n")
    print("| run | wall s | ratio to copy | read | fragmentation | anonymize | write | verify | NCP | peak RSS MiB (coordinator) | worker peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    copy = min(copy_baseline(src, out_dir / "copy.parquet") for _ in range(repeat))
    print(f"| DuckDB COPY | {copy:.2f} | 1.0 | | | | | | | | |")
    for workers in (1, 2):
        runs = [run_cli([*base, "-o", str(out_dir / "w.parquet"), "--workers", str(workers)]) for _ in range(repeat)]
        doc, wall, rss = min(runs, key=lambda r: r[1])
        t = doc["timings"]
        wrss = ", ".join(f"{v:.0f}" for v in doc["worker_peak_rss_mb"].values()) or "in-process"
        print(
            f"| sqlanon, {workers} worker(s), {doc['fragments']} fragment(s) | {wall:.2f} | {wall / copy:.1f} | "
            f"{t['read']:.2f} | {t['fragmentation']:.2f} | {t['anonymize']:.2f} | {t['write']:.2f} | "
            f"{t['verify']:.2f} | {doc['ncp']:.4g} | {rss:.0f} | {wrss} |"
        )
    print("\nNCP of distributed runs against the single-fragment run (2 workers)\n")
    single = run_cli([*base, "-o", str(out_dir / "one.parquet"), "--workers", "1"])[0]
    print(f"single fragment: NCP {single['ncp']:.6g}, DP {single['dp']:.4g}\n")
    print("| sample | strategy | fragments | NCP | NCP / single | DP | fragment rows min–max |")
    print("|---|---|---|---|---|---|---|")
    for sample in ("0.001", "0.0001", "0.00001"):
        for strategy in ("mondrian", "quantile"):
            planned = set()
            for frags in (2, 4, 8, 10):
                out = out_dir / f"f{frags}.parquet"
                doc = run_cli([*base, "-o", str(out), "--workers", "2", "--fragments", str(frags),
                               "--sample", sample, "--fragmentation", strategy])[0]
                if doc["fragments"] in planned:
                    continue  # a tiny sample caps the fragments: the same plan as the row above
                planned.add(doc["fragments"])
                sizes = fragment_rows(doc["metrics_table"], doc["run_id"])
                print(
                    f"| {float(sample):.3%} | {strategy} | {doc['fragments']} | {doc['ncp']:.6g} | "
                    f"{doc['ncp'] / single['ncp']:.4f} | {doc['dp']:.4g} | {min(sizes):,}–{max(sizes):,} |"
                )


def fragment_rows(metrics: str, run_id: str) -> list[int]:
    import duckdb

    rows = duckdb.execute(
        "SELECT rows FROM read_parquet(?) WHERE run_id = ? AND kind = 'fragment'", [metrics, run_id]
    ).fetchall()
    return [r[0] for r in rows]


def big(rows: int, fragment_counts: list[int], rev: str | None = None) -> None:
    """A large table on 2 workers, by fragment count: this tree, and ``rev``
    when given (its runs interleaved with this tree's). Each tree's kernel
    is compiled and cached by a small warm-up run first (it was compiled
    inside the first timed run: ~15 s more on a fresh checkout)."""
    src = poker_file(rows)
    with contextlib.ExitStack() as stack:
        out_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sqlanon-bench-")))
        trees = {"this tree": None}
        if rev:
            trees[rev] = str(stack.enter_context(_checkout(rev)))
        base = ["anonymize", "--qi", QI, "--sensitive", "hand", "-k", "10", "-l", "2", "--json", "--overwrite",
                "--workers", "2"]
        for tree in trees.values():
            run_cli([*base, str(poker_file(10_000)), "-o", str(out_dir / "warm.parquet")], tree)
        print(f"poker {rows:,} rows as Parquet, k = 10, l = 2, 2 workers; {machine()}\n")
        print("| version | fragments | wall s | anonymize s | rows per fragment | worker peak RSS MiB | "
              "coordinator peak RSS MiB |")
        print("|---|---|---|---|---|---|---|")
        for frags in fragment_counts:
            for name, tree in trees.items():
                doc, wall, rss = run_cli([*base, str(src), "-o", str(out_dir / "big.parquet"), "--fragments",
                                          str(frags)], tree)
                wrss = ", ".join(f"{v:.0f}" for v in doc["worker_peak_rss_mb"].values())
                print(f"| {name} | {doc['fragments']} | {wall:.1f} | {doc['timings']['anonymize']:.1f} | "
                      f"~{rows // doc['fragments']:,} | {wrss} | {rss:.0f} |")


def pg_server(url: str | None):
    """``(server, url)``: ``url``, or a throwaway server as the test suite starts one."""
    if url is not None:
        return None, url
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from pg_server import PgServer

    server = PgServer.start()
    return server, server.url_with_password(server.password)


def load_poker(url: str, rows: int) -> str:
    """Load poker into table ``poker`` on the server (dropping earlier tables); return a libpq URL."""
    import duckdb
    import psycopg

    from sqlanon.warehouse import Conn, attach

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS poker, poker_copy, poker_anon, poker_anon__metrics")
    con = duckdb.connect()
    attach(con, Conn(url), "pg", read_only=False)
    con.execute(f"CREATE TABLE pg.public.poker AS SELECT * FROM read_parquet('{poker_file(rows)}')")
    con.close()
    return dsn


def settle(dsn: str) -> None:
    """Before each timed run on the server: vacuum and analyze what the last
    run wrote and checkpoint, so autovacuum and the checkpointer do not take
    the two cores in the middle of the next run (outside the timings)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as c:
        for table in ("poker", "poker_copy", "poker_anon"):
            if c.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None:
                c.execute(f"VACUUM ANALYZE {table}")
        try:
            c.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            pass  # --url with a role that may not checkpoint


@contextlib.contextmanager
def _checkout(rev: str):
    """A temporary git worktree of revision ``rev`` (its path), removed after."""
    old = Path(tempfile.mkdtemp(prefix="sqlanon-compare-")) / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(old), rev], check=True)
    # The editable install maps sqlanon.sql_templates to this tree's
    # sql_templates/; inside the checkout, a link makes it find its own.
    (old / "sqlanon" / "sql_templates").symlink_to(Path("..") / "sql_templates")
    try:
        yield old
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], check=False)
        shutil.rmtree(old.parent, ignore_errors=True)


def compare(rev: str, rows: int, workers: int, repeat: int, url: str | None, csv: bool = False,
            fragments: int | None = None, table: bool = False, fragmentation: str | None = None,
            zip_qi: bool = False) -> None:
    """Revision ``rev`` against this tree, end to end, runs alternating in one
    session (:func:`_alternate`). ``--url``: PostgreSQL table to table (poker
    loaded there); ``--csv``: poker as a CSV file into Parquet; ``--duckdb``:
    poker as a table of a DuckDB file into Parquet; otherwise Parquet to
    Parquet. ``--zip``: poker with an eleventh QI of ~90,000 values
    (:func:`poker_zip_file`), Parquet to Parquet.
    """
    with _checkout(rev) as old, tempfile.TemporaryDirectory(prefix="sqlanon-bench-") as scratch:
        out_dir = Path(scratch)
        if url is None:
            dsn = None
            src = poker_zip_file(rows) if zip_qi else poker_file(rows)
            if csv:
                src = src.with_suffix(".csv")
                if not src.exists():
                    import duckdb

                    duckdb.sql(f"COPY (SELECT * FROM read_parquet('{poker_file(rows)}')) TO '{src}' (HEADER)")
            if table:
                src = src.with_suffix(".duckdb")
                if not src.exists():
                    import duckdb

                    with duckdb.connect(str(src)) as con:
                        con.execute(f"CREATE TABLE poker AS FROM read_parquet('{poker_file(rows)}')")
            base = ["anonymize", str(src), *(["--table", "poker"] if table else []), "-o", str(out_dir / "out.parquet")]
        else:
            dsn = load_poker(url, rows)
            base = ["anonymize", url, "--table", "public.poker", "-o", url, "--target-table", "public.poker_anon"]
        base += ["--qi", QI + (",zip" if zip_qi else ""), "--sensitive", "hand", "-k", "10", "-l", "2", "--json",
                 "--overwrite", "--workers", str(workers), *(["--fragments", str(fragments)] if fragments else []),
                 *(["--fragmentation", fragmentation] if fragmentation else [])]
        where = ("PostgreSQL → PostgreSQL" if dsn else "CSV → Parquet" if csv else "DuckDB table → Parquet" if table
                 else "Parquet → Parquet")
        frags = (f"{fragments} fragments, " if fragments else "") + (f"{fragmentation}, " if fragmentation else "")
        print(f"poker {rows:,} rows{' and a zip QI' if zip_qi else ''}, {where}, {workers} worker(s), {frags}k = 10, "
              f"l = 2; median of {repeat} "
              f"alternating runs; {machine()}\n")
        _alternate({rev: str(old), "this tree": str(REPO)}, base, repeat, (lambda: settle(dsn)) if dsn else None)


def _alternate(trees: dict[str, str], base: list[str], repeat: int, before=None) -> None:
    """Run ``base`` in each of ``trees`` (name: source tree) ``repeat`` times,
    alternating, and print the medians of each phase.

    The machine's speed drifts by ~30 % over minutes; alternating the
    versions run by run and taking medians keeps that drift out of the
    difference. Each version goes first in every other round: with REV
    always first, the CSV read's medians differed by 0.33 s, and not with
    the order swapped (BENCHMARKS.md, thirtieth session). ``before``: called
    before each run (a server's settling).
    """
    import statistics

    for tree in trees.values():
        run_cli(base, tree)  # warm: each tree compiles and caches its own kernel
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for round_ in range(repeat):
        for name, tree in (list if round_ % 2 == 0 else reversed)(list(trees.items())):
            if before:
                before()
            doc, wall, _ = run_cli(base, tree)
            runs[name].append({"wall": wall, **doc["timings"], "after output": doc["bench_after_output_s"]})
    phases = ["wall", "read", "fragmentation", "anonymize", "write", "verify", "after output"]
    print("| version | " + " | ".join(f"{p} s" for p in phases) + " | min wall s |")
    print("|---|" + "---|" * (len(phases) + 1))
    for name, rs in runs.items():
        cells = " | ".join(f"{statistics.median(r[p] for r in rs):.2f}" for p in phases)
        print(f"| {name} | {cells} | {min(r['wall'] for r in rs):.2f} |")


def prefix(rev: str, rows: int, fragments: int, repeat: int) -> None:
    """A text QI generalized by its common prefix (e-mail addresses, nearly
    one distinct value per row), whose domain (every distinct value) each
    worker needs: ``rev`` against this tree, runs alternating (:func:`_alternate`)."""
    DATA.mkdir(exist_ok=True)
    src = DATA / f"emails-{rows}.parquet"
    if not src.exists():
        import duckdb

        duckdb.sql(f"""COPY (SELECT i AS id, 'user' || (hash(i) % 100000000)::VARCHAR || '@'
            || ['gmail.com', 'yahoo.com', 'corp.example'][1 + i % 3] AS email, 20 + i % 50 AS age,
            'dx' || (i % 7)::VARCHAR AS dx FROM range({rows}) t(i)) TO '{src}' (FORMAT parquet)""")
    with _checkout(rev) as old, tempfile.TemporaryDirectory(prefix="sqlanon-bench-") as scratch:
        base = ["anonymize", str(src), "-o", str(Path(scratch) / "out.parquet"), "--qi", "email,age",
                "--generalization", "email=prefix", "--sensitive", "dx", "-k", "10", "-l", "2", "--workers", "2",
                "--fragments", str(fragments), "--json", "--overwrite"]
        print(f"{rows:,} e-mail addresses, QIs email (prefix) and age, k = 10, l = 2, 2 workers, {fragments} "
              f"fragments; median of {repeat} alternating runs; {machine()}\n")
        _alternate({rev: str(old), "this tree": str(REPO)}, base, repeat)


def hierarchy(rows: int, leaves: int, rev: str | None) -> None:
    """A QI with a large hierarchy (ZIP codes, ICD-10): its cuts name
    thousands of leaves. This tree, and ``rev`` when given, against a plain
    copy; one run each (a slow version takes minutes)."""
    DATA.mkdir(exist_ok=True)
    src, tree_file = DATA / f"codes-{rows}-{leaves}.parquet", DATA / f"codes-{leaves}.csv"
    if not tree_file.exists():  # leaf; group of 50; group of 2,500; *
        tree_file.write_text("".join(f"c{i:06d};m{i // 50:05d};t{i // 2500:03d};*\n" for i in range(leaves)))
    if not src.exists():
        import duckdb

        duckdb.sql(f"""COPY (SELECT i AS id, 'c' || lpad((hash(i, 2) % {leaves})::VARCHAR, 6, '0') AS code,
            'dx' || (hash(i, 11) % 20)::VARCHAR AS diag FROM range({rows}) t(i)) TO '{src}' (FORMAT parquet)""")
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sqlanon-bench-")))
        trees = {"this tree": None}
        if rev:
            trees[rev] = str(stack.enter_context(_checkout(rev)))
        base = ["anonymize", str(src), "-o", str(scratch / "out.parquet"), "--qi", "code", "--hierarchy",
                f"code={tree_file}", "--sensitive", "diag", "-k", "10", "-l", "2", "--workers", "2", "--json",
                "--overwrite"]
        print(f"{rows:,} rows, QI code with a hierarchy of {leaves:,} leaves (4 levels), k = 10, l = 2, "
              f"2 workers; {machine()}\n")
        print("| run | wall s | read s | anonymize s | classes | NCP |")
        print("|---|---|---|---|---|---|")
        print(f"| DuckDB COPY | {copy_baseline(src, scratch / 'copy.parquet'):.2f} | | | | |")
        for name, tree in trees.items():
            # Warm: the tree's kernel compiled and cached (one fragment: no cut to read by).
            run_cli([*base[:-4], "--workers", "1", "--json", "--overwrite"], tree)
            doc, wall, _ = run_cli(base, tree)
            t = doc["timings"]
            print(f"| {name} | {wall:.2f} | {t['read']:.2f} | {t['anonymize']:.2f} | {doc['classes']:,} | "
                  f"{doc['ncp']:.6g} |")


def _tree_rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (Linux /proc), MiB."""
    parents, rss = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                parents[int(entry)], rss[int(entry)] = int(fields[1]), int(fields[21])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {pid}, {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - tree
        tree |= frontier
    return sum(rss.get(p, 0) for p in tree) * os.sysconf("SC_PAGE_SIZE") / 2**20


def wide(rows: int, rev: str | None) -> None:
    """Wide rows (25 QIs, 60 pass-through columns: strings of 200
    characters, lists, structs): the memory of the whole process tree,
    sampled every 0.25 s, at its peak and once the fragments are done (the
    coordinator assembling and verifying, the workers idle)."""
    DATA.mkdir(exist_ok=True)
    src = DATA / f"wide-{rows}.parquet"
    if not src.exists():
        import duckdb

        qi = ", ".join(f"(hash(i, {j}) % {[5, 10, 20, 50, 100][j % 5]})::INT AS q{j}" for j in range(25))
        rest = [f"(hash(i, {100 + j}) >> 1)::BIGINT AS n{j}" for j in range(50)]
        rest += [f"repeat(md5((i * {j + 1})::VARCHAR), 6) || md5(i::VARCHAR)[:8] AS s{j}" for j in range(6)]
        rest += ["[i, i + 1, i % 7] AS l0", "['a' || (i % 13)::VARCHAR, 'b'] AS l1",
                 "{'x': i % 100, 'y': 'v' || (i % 17)::VARCHAR} AS st0", "{'k': [1, 2], 'm': i} AS st1"]
        duckdb.sql(f"COPY (SELECT {qi}, {', '.join(rest)}, 'dx' || (hash(i, 999) % 20)::VARCHAR AS diag "
                   f"FROM range({rows}) t(i)) TO '{src}' (FORMAT parquet)")
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sqlanon-bench-")))
        trees = {"this tree": None}
        if rev:
            trees[rev] = str(stack.enter_context(_checkout(rev)))
        args = ["-m", "sqlanon", "anonymize", str(src), "-o", str(scratch / "out.parquet"), "--qi",
                ",".join(f"q{j}" for j in range(25)), "--sensitive", "diag", "-k", "10", "-l", "2", "--workers", "2",
                "--json", "--overwrite", "--quiet"]
        print(f"{rows:,} rows, 25 QIs and 61 other columns ({src.stat().st_size / 2**30:.2f} GiB of Parquet), "
              f"k = 10, l = 2, 2 workers; {machine()}\n")
        print("| run | wall s | tree peak MiB | tree peak once the fragments are done MiB | median then MiB |")
        print("|---|---|---|---|---|")
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": tree} if tree else None
            t0 = time.perf_counter()
            proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True, env=env, cwd=tree)
            samples = []
            while proc.poll() is None:
                samples.append((time.perf_counter() - t0, _tree_rss_mib(proc.pid)))
                time.sleep(0.25)
            wall = time.perf_counter() - t0
            t = json.loads(proc.stdout.read())["timings"]
            done = wall - t["total"] + t["read"] + t["fragmentation"] + t["anonymize"]
            late = sorted(m for at, m in samples if at > done) or [0.0]
            print(f"| {name} | {wall:.1f} | {max(m for _, m in samples):,.0f} | {late[-1]:,.0f} | "
                  f"{late[len(late) // 2]:,.0f} |")


def _median_s(f, repeat: int) -> float:
    """The median wall time of ``repeat`` calls of ``f``."""
    import statistics

    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def checksums(rows: int, url: str | None, repeat: int) -> None:
    """What the pass-through checksums cost (poker: one pass-through column, hand), median of ``repeat``."""
    import psycopg

    import sqlanon
    from sqlanon import coordinator, io
    from sqlanon.verification import column_checksums

    def median_s(f) -> float:
        return _median_s(f, repeat)

    src = io.open_source(str(poker_file(rows)))
    spec = sqlanon.build_spec(QI.split(","), k=10, l=2, sensitive=["hand"])
    con = io.connect()
    src.attach(con)
    schema = src.arrow_schema(con)
    print(f"poker {rows:,} rows, median of {repeat}; {machine()}\n")
    print("| where | step | seconds |")
    print("|---|---|---|")
    without = median_s(lambda: coordinator.domain_stats(con, src, spec, schema))
    with_sum = median_s(lambda: coordinator.domain_stats(con, src, spec, schema, ["hand"]))
    alone = median_s(lambda: column_checksums(con, src.relation, ["hand"]))
    print(f"| Parquet, DuckDB | statistics pass without / with the input's checksum | {without:.3f} / {with_sum:.3f} |")
    print(f"| Parquet, DuckDB | the output's checksum (a separate scan) | {alone:.3f} |")
    server, url = pg_server(url)
    try:
        dsn = load_poker(url, rows)
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("VACUUM ANALYZE poker")
            count = median_s(lambda: c.execute("SELECT count(*) FROM poker").fetchone())
            one = median_s(lambda: column_checksums(c, "poker", ["hand"], "postgres"))
        print(f"| PostgreSQL | `count(*)`, for scale | {count:.3f} |")
        print(f"| PostgreSQL | one checksum (run twice: input in its snapshot, output) | {one:.3f} |")
    finally:
        if server is not None:
            server.stop()


def lake(files: int, rows_per_file: int, repeat: int) -> None:
    """What opening a lake of many small files costs: listing them (skipping
    ``_``/``.`` names) and reading every file's columns (``io.open_source``),
    against a plain ``count(*)`` over the same files, median of ``repeat``;
    then a whole run on the lake."""
    import duckdb

    from sqlanon import io

    root = DATA / f"lake-{files}x{rows_per_file}"
    if not root.exists():
        tmp = root.with_name(root.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        con = duckdb.connect()
        con.execute(f"CREATE TABLE t AS SELECT i % {max(files, 1)} AS f, 18 + i % 60 AS age, i % 3 AS s "
                    f"FROM range({files * rows_per_file}) r(i)")
        con.execute(f"COPY t TO '{tmp}' (FORMAT parquet, PARTITION_BY (f), WRITE_PARTITION_COLUMNS false)")
        # One file per directory f=N (hive), as a partitioned lake is written.
        tmp.rename(root)

    def median_s(f) -> float:
        return _median_s(f, repeat)

    opened = median_s(lambda: io.open_source(str(root)))
    glob_ = f"{root}/**/*.parquet"
    count = median_s(lambda: duckdb.execute(f"SELECT count(*) FROM read_parquet('{glob_}')").fetchone())
    with tempfile.TemporaryDirectory() as out:
        _, wall, _ = run_cli(["anonymize", str(root), "-o", f"{out}/o.parquet", "--qi", "age", "-k", "10",
                              "--workers", "2", "--json", "--quiet"])
    print(f"{files:,} Parquet files of {rows_per_file} rows (hive directories f=N), median of {repeat}; {machine()}\n")
    print("| step | seconds |")
    print("|---|---|")
    print(f"| `io.open_source`: list the files, read every file's columns | {opened:.3f} |")
    print(f"| `count(*)` over the same files (a glob), for scale | {count:.3f} |")
    print(f"| a whole run on the lake (`--qi age -k 10 --workers 2`), wall | {wall:.2f} |")


def postgres(rows: int, url: str | None, repeat: int) -> None:
    """Poker in PostgreSQL → anonymized table in PostgreSQL, against COPY out + COPY in."""
    import psycopg

    server, url = pg_server(url)
    try:
        dsn = load_poker(url, rows)

        def fresh_copy_table() -> None:
            settle(dsn)
            with psycopg.connect(dsn, autocommit=True) as c:
                c.execute("DROP TABLE IF EXISTS poker_copy")
                c.execute("CREATE TABLE poker_copy (LIKE poker)")

        # Both baselines are timed from connecting to the end of the load.
        def copy_psycopg() -> float:
            """Out and back in through one Python process (psycopg, binary)."""
            fresh_copy_table()
            t0 = time.perf_counter()
            with psycopg.connect(dsn, autocommit=True) as a, psycopg.connect(dsn, autocommit=True) as b:
                with a.cursor().copy("COPY poker TO STDOUT (FORMAT binary)") as out, \
                        b.cursor().copy("COPY poker_copy FROM STDIN (FORMAT binary)") as into:
                    for chunk in out:
                        into.write(chunk)
            return time.perf_counter() - t0

        psql = shutil.which("psql") or str(Path(subprocess.check_output(["pg_config", "--bindir"], text=True).strip()) / "psql")
        # The password goes through the environment, not psql's command line.
        params = psycopg.conninfo.conninfo_to_dict(dsn)
        psql_env = {**os.environ, "PGPASSWORD": str(params.pop("password", "") or "")}
        pw_free = psycopg.conninfo.make_conninfo(**params)

        def copy_psql() -> float:
            """The issue's command as a shell would run it: psql COPY TO STDOUT | psql COPY FROM STDIN
            (text format, the two ends running at once)."""
            fresh_copy_table()
            t0 = time.perf_counter()
            out = subprocess.Popen([psql, "-q", pw_free, "-c", "COPY poker TO STDOUT"], stdout=subprocess.PIPE, env=psql_env)
            into = subprocess.run([psql, "-q", pw_free, "-c", "COPY poker_copy FROM STDIN"], stdin=out.stdout, env=psql_env)
            out.stdout.close()
            if out.wait() or into.returncode:
                raise SystemExit("the psql COPY baseline failed")
            return time.perf_counter() - t0

        copies = {
            "psql `COPY poker TO STDOUT` piped into psql `COPY poker_copy FROM STDIN` (text)":
                min(copy_psql() for _ in range(repeat)),
            "psycopg, one process: COPY TO STDOUT → COPY FROM STDIN (binary)": min(copy_psycopg() for _ in range(repeat)),
        }
        base = ["anonymize", url, "--table", "public.poker", "-o", url, "--target-table", "public.poker_anon",
                "--qi", QI, "--sensitive", "hand", "-k", "10", "-l", "2", "--json", "--overwrite", "--workers", "2"]
        run_cli(base)  # warm: numba cache, extension load

        def timed_run():
            settle(dsn)
            return run_cli(base)

        runs = [timed_run() for _ in range(repeat)]
        doc, wall, rss = min(runs, key=lambda r: r[1])
        t = doc["timings"]
        print(f"poker {rows:,} rows in PostgreSQL 15 (same machine), k = 10, l = 2, best of {repeat}; {machine()}\n")
        print("| run | wall s | ratio (psql pipe / psycopg) | read | fragmentation | anonymize | write | verify | classes | NCP |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, secs in copies.items():
            print(f"| {name} | {secs:.2f} | 1.0 | | | | | | | |")
        ratios = " / ".join(f"{wall / secs:.1f}" for secs in copies.values())
        print(
            f"| sqlanon PG → PG, 2 workers, {doc['fragments']} fragments | {wall:.2f} | {ratios} | "
            f"{t['read']:.2f} | {t['fragmentation']:.2f} | {t['anonymize']:.2f} | {t['write']:.2f} | "
            f"{t['verify']:.2f} | {doc['classes']:,} | {doc['ncp']:.4g} |"
        )
    finally:
        if server is not None:
            server.stop()


def startup(executor: str, workers: int) -> float:
    """Seconds until an executor can run tasks (pool, cluster or Spark session up)."""
    code = (
        "import sys, time; from sqlanon import executors; t = time.perf_counter(); "
        "e = executors.make_executor(sys.argv[1], int(sys.argv[2])); e.warm(); "
        "print(time.perf_counter() - t); e.shutdown()"
    )
    proc = subprocess.run([sys.executable, "-c", code, executor, str(workers)], capture_output=True, text=True)
    return float(proc.stdout.strip().splitlines()[-1])


def executors_bench(rows: int, fragments: int) -> None:
    import duckdb

    src = poker_file(rows)
    out_dir = Path(tempfile.mkdtemp(prefix="sqlanon-bench-"))
    base = ["anonymize", str(src), "--qi", QI, "--sensitive", "hand", "-k", "10", "-l", "2", "--json", "--overwrite",
            "--fragments", str(fragments), "--seed", "1"]
    run_cli([*base, "-o", str(out_dir / "warm.parquet"), "--workers", "2"])
    print(f"poker {rows:,} rows, k = 10, l = 2, {fragments} fragments; {machine()}\n")
    print("| executor | workers | start-up s | wall s | anonymize s | fragment s (mean, max) | classes | DP | NCP |")
    print("|---|---|---|---|---|---|---|---|---|")
    for executor, workers in (("local", 1), ("local", 2), ("dask", 2), ("spark", 2)):
        doc, wall, _ = run_cli([*base, "-o", str(out_dir / f"{executor}.parquet"), "--workers", str(workers),
                                "--executor", executor])
        secs = [r[0] for r in duckdb.execute(
            "SELECT seconds FROM read_parquet(?) WHERE run_id = ? AND kind = 'fragment'",
            [doc["metrics_table"], doc["run_id"]]).fetchall()]
        up = startup(executor, workers) if (executor, workers) != ("local", 1) else 0.0
        print(f"| {executor} | {workers} | {up:.2f} | {wall:.2f} | {doc['timings']['anonymize']:.2f} | "
              f"{sum(secs) / len(secs):.2f}, {max(secs):.2f} | {doc['classes']:,} | {doc['dp']} | {doc['ncp']!r} |")


def bytecode(rows: int, repeat: int) -> None:
    """The pipeline with sqlanon's bytecode missing (deleted before each run,
    as an editable install under PYTHONDONTWRITEBYTECODE=1 has it) against
    compiled (as a wheel's install has it), runs alternating."""
    import glob
    import statistics

    import sqlanon

    src, package = poker_file(rows), Path(sqlanon.__file__).parent
    with tempfile.TemporaryDirectory(prefix="sqlanon-bench-") as scratch:
        out = Path(scratch)
        cmd = [sys.executable, "-c", "import sys\nfrom sqlanon.cli import entry\nentry(sys.argv[1:], 'sqlanon')",
               "anonymize", str(src), "--qi", QI, "--sensitive", "hand", "-k", "10", "-l", "2", "--json",
               "--overwrite", "--workers", "2", "-o", str(out / "w.parquet")]

        def run() -> tuple[float, dict]:
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, check=True)
            return time.perf_counter() - t0, json.loads(p.stdout)["timings"]

        compile_bytecode()
        run()  # warm: the kernel's cache, the file's pages
        runs: dict[str, list] = {"stale": [], "compiled": []}
        for _ in range(repeat):
            for kind, rs in runs.items():
                if kind == "stale":
                    for f in glob.glob(str(package / "**" / "__pycache__" / "*.pyc"), recursive=True):
                        os.unlink(f)
                else:
                    compile_bytecode()
                rs.append(run())
        copy = [copy_baseline(src, out / "copy.parquet") for _ in range(5)]
        compile_bytecode()
    print(f"poker {rows:,} rows, 2 workers, {repeat} alternating runs each; {machine()}\n")
    phases = ["read", "anonymize", "write", "verify", "total"]
    print("| bytecode | median wall s | min wall s | " + " | ".join(phases) + " |")
    print("|---|---|---|" + "---|" * len(phases))
    for kind, rs in runs.items():
        walls = [w for w, _ in rs]
        cells = " | ".join(f"{statistics.median(t[p] for _, t in rs):.2f}" for p in phases)
        print(f"| {kind} | {statistics.median(walls):.2f} | {min(walls):.2f} | {cells} |")
    print(f"\nDuckDB copy: min {min(copy):.2f} s, median {statistics.median(copy):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("engine", help="one process, the whole table: the Mondrian engine")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--k", type=int, nargs="+", default=[5, 10, 20])
    p.add_argument("--repeat", type=int, default=3)
    p = sub.add_parser("pipeline", help="coordinator + workers end to end, against a plain DuckDB copy")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p = sub.add_parser("big", help="a large table: time and worker memory by fragment count")
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--fragments", type=int, nargs="+", default=[16, 4])
    p.add_argument("--rev", help="also run this git revision (e.g. HEAD~1), interleaved")
    p = sub.add_parser("postgres", help="PostgreSQL table to PostgreSQL table, against COPY out + COPY in")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--url", help="an existing server (default: start a throwaway one)")
    p.add_argument("--repeat", type=int, default=3)
    p = sub.add_parser("checksums", help="what comparing the pass-through columns with the input costs")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--url", help="an existing server (default: start a throwaway one)")
    p.add_argument("--repeat", type=int, default=7)
    p = sub.add_parser("lake", help="opening a lake of many small files: listing and column checks")
    p.add_argument("--files", type=int, default=3000)
    p.add_argument("--rows-per-file", type=int, default=100)
    p.add_argument("--repeat", type=int, default=5)
    p = sub.add_parser("executors", help="local pool vs Dask vs Spark, and local scaling 1 -> 2 workers")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--fragments", type=int, default=8)
    p = sub.add_parser("hierarchy", help="a QI with a large hierarchy: cuts that name thousands of leaves")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--leaves", type=int, default=50_000)
    p.add_argument("--rev", help="also run this git revision (e.g. HEAD~1), once")
    p = sub.add_parser("prefix", help="a prefix-generalized text QI of ~1M distinct values, against a revision")
    p.add_argument("rev", help="the revision to compare with, e.g. HEAD~3 or a commit")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--fragments", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3)
    p = sub.add_parser("wide", help="wide rows: the process tree's memory, at its peak and after the fragments")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rev", help="also run this git revision (e.g. HEAD~1), once")
    p = sub.add_parser("bytecode", help="sqlanon's bytecode missing (an editable install) against compiled")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=8)
    p = sub.add_parser("compare", help="a git revision against this tree, runs alternating, medians")
    p.add_argument("rev", help="the revision to compare with, e.g. HEAD~3 or a commit")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=8)
    p.add_argument("--url", help="PostgreSQL table to table on this server (default: Parquet files)")
    p.add_argument("--csv", action="store_true", help="poker as a CSV file into Parquet (default: Parquet files)")
    p.add_argument("--duckdb", action="store_true", help="poker as a table of a DuckDB file into Parquet")
    p.add_argument("--fragments", type=int, help="--fragments of every run (default: sqlanon's, one per worker)")
    p.add_argument("--fragmentation", choices=["mondrian", "quantile"], help="--fragmentation of every run")
    p.add_argument("--zip", action="store_true", help="poker with a QI of ~90,000 values, Parquet into Parquet "
                   "(a quantile plan of poker alone has 13 fragments at most)")
    args = parser.parse_args()
    if args.what == "compare":
        if sum([args.csv, args.duckdb, args.zip]) > 1 or args.zip and args.url:
            parser.error("--csv, --duckdb, --zip and --url: one input at a time")
        compare(args.rev, args.rows, args.workers, args.repeat, args.url, args.csv, args.fragments, args.duckdb,
                args.fragmentation, args.zip)
        return
    if args.what == "bytecode":
        bytecode(args.rows, args.repeat)
        return
    if args.what == "hierarchy":
        hierarchy(args.rows, args.leaves, args.rev)
        return
    if args.what == "prefix":
        prefix(args.rev, args.rows, args.fragments, args.repeat)
        return
    if args.what == "wide":
        wide(args.rows, args.rev)
        return
    if args.what == "executors":
        executors_bench(args.rows, args.fragments)
        return
    if args.what == "postgres":
        postgres(args.rows, args.url, args.repeat)
        return
    if args.what == "checksums":
        checksums(args.rows, args.url, args.repeat)
        return
    if args.what == "lake":
        lake(args.files, args.rows_per_file, args.repeat)
        return
    if args.what == "engine":
        engine(args.rows, args.k, args.repeat)
    elif args.what == "pipeline":
        pipeline(args.rows, args.repeat)
    else:
        big(args.rows, args.fragments, args.rev)


if __name__ == "__main__":
    main()
