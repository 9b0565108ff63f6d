"""Benchmarks behind BENCHMARKS.md.

    python -m examples.bench engine [--rows 1000000] [--k 5 10 20] [--repeat 3]

``engine``: the Poker Hand data set (examples/poker.py, seed 0) as Parquet,
10 QIs (s1..s5, r1..r5), sensitive ``hand``, l = 2; every run is the real CLI
(``sqlanon anonymize … --json``) in a fresh process, so the timings are the
ones a user sees, and the peak RSS is that process's. The numba kernel is
compiled (and cached on disk) by a warm-up run first; the compile cost is
reported separately. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from examples.poker import write_poker

DATA = Path(os.environ.get("SQLANON_BENCH_DATA", Path(__file__).resolve().parent.parent / "bench-data"))
QI = "s1,r1,s2,r2,s3,r3,s4,r4,s5,r5"


def poker_file(rows: int) -> Path:
    """The poker Parquet file of ``rows`` rows, generated once."""
    DATA.mkdir(exist_ok=True)
    path = DATA / f"poker-{rows}.parquet"
    if not path.exists():
        write_poker(path, rows, seed=0)
    return path


def run_cli(args: list[str]) -> tuple[dict, float, float]:
    """Run ``sqlanon`` in a child; return its JSON, wall seconds and peak RSS (MiB)."""
    cmd = [sys.executable, "-c", "import resource, sys; from sqlanon.cli import main; "
           "sys.argv = ['sqlanon'] + sys.argv[1:]\n"
           "try:\n    main()\nfinally:\n"
           "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"sqlanon failed: {proc.stderr.strip()}")
    rss_kib = int(proc.stderr.strip().splitlines()[-1])
    return json.loads(proc.stdout), wall, rss_kib / 1024


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def engine(rows: int, ks: list[int], repeat: int) -> None:
    src = poker_file(rows)
    out_dir = Path(tempfile.mkdtemp(prefix="sqlanon-bench-"))
    base = ["anonymize", str(src), "--qi", QI, "--sensitive", "hand", "-l", "2", "--json", "--overwrite"]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("engine", help="one process, the whole table: the Mondrian engine")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--k", type=int, nargs="+", default=[5, 10, 20])
    p.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.what == "engine":
        engine(args.rows, args.k, args.repeat)


if __name__ == "__main__":
    main()
