"""The kernel loader (sqlanon.kernel): the ahead-of-time module, its cache, the JIT fallback."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from sqlanon import kernel, mondrian
from sqlanon.errors import InputError

# One test process for the module: each compiles numba's JIT of the kernel
# on first use (~20 s of CPU), once instead of once per process.
pytestmark = pytest.mark.xdist_group("kernel")

REPO = Path(__file__).resolve().parents[1]


def _inputs(seed: int):
    """Random kernel inputs shaped as the engine builds them (NULL code = domain size)."""
    rng = np.random.default_rng(seed)
    n, d, n_sens = int(rng.integers(1, 3000)), int(rng.integers(1, 6)), int(rng.integers(0, 3))
    dom = rng.integers(1, 40, d)
    X = np.column_stack([rng.integers(0, dm + 1, n) for dm in dom]).astype(np.int32)
    sdom = rng.integers(2, 8, n_sens)
    S = np.column_stack([rng.integers(0, dm, n) for dm in sdom]).astype(np.int32) if n_sens else np.empty((n, 0), np.int32)
    is_cat = rng.random(d) < 0.5
    vals = [np.sort(rng.normal(size=dm + 1)) for dm in dom]
    values = np.concatenate(vals)
    v_off = np.concatenate([[0], np.cumsum([len(v) for v in vals])])[:-1].astype(np.int64)
    gspan = np.where(is_cat, dom, [v[-2] - v[0] + 1 for v in vals]).astype(np.float64)
    c_off = np.concatenate([[0], np.cumsum(dom + 1)]).astype(np.int64)
    s_off = np.concatenate([[0], np.cumsum(sdom + 1)]).astype(np.int64)
    k, l = int(rng.integers(1, 20)), int(rng.integers(1, 3))
    return X, S, k, l, is_cat, values, v_off, gspan, c_off, s_off, dom


def _trees(dom, seed):
    """Random trees over the codes ``0 .. dom[a] - 1`` of every other column
    (code ``dom[a]`` is its NULL), as the engine passes hierarchies to the kernel."""
    rng = np.random.default_rng(seed)
    d = len(dom)
    h_off = np.full(d, -1, np.int64)
    h_nleaves = np.zeros(d, np.int64)
    leaf, parent, first, last = [0], [-1], [0], [0]

    def build(lo, hi, par):
        node = len(parent)
        parent.append(par)
        first.append(lo)
        last.append(hi)
        if lo == hi:
            leaf[off + lo] = node
            return
        cuts = np.sort(rng.choice(np.arange(lo + 1, hi + 1), min(int(rng.integers(1, 4)), hi - lo), replace=False))
        for a_, b_ in zip(np.r_[lo, cuts], np.r_[cuts - 1, hi]):
            build(int(a_), int(b_), node)

    for a in range(0, d, 2):
        if dom[a] < 1:
            continue
        off = len(leaf)
        h_off[a] = off
        h_nleaves[a] = dom[a]
        leaf.extend([0] * int(dom[a]))
        build(0, int(dom[a]) - 1, -1)
    return h_off, h_nleaves, *(np.array(x, np.int64) for x in (leaf, parent, first, last))


@pytest.mark.parametrize("seed", range(8))
def test_compiled_module_matches_the_jit(seed):
    """What ships (the ahead-of-time module) cuts and summarizes exactly as numba's JIT does."""
    aot = kernel.load()
    assert aot.__name__ == "sqlanon._mondrian_aot", "the kernel should load compiled ahead of time here"
    X, S, k, l, is_cat, values, v_off, gspan, c_off, s_off, dom = _inputs(seed)
    X2, S2 = X.copy(), S.copy()
    hier = _trees(dom, seed) if seed % 2 else kernel.no_hierarchy(X.shape[1])
    perm, bounds = kernel.partition(X, S, k, l, is_cat, values, v_off, gspan, c_off, s_off, *hier)
    perm2, bounds2 = mondrian.partition(X2, S2, k, l, is_cat, values, v_off, gspan, c_off, s_off, *hier)
    np.testing.assert_array_equal(perm, perm2)
    np.testing.assert_array_equal(bounds, bounds2)
    np.testing.assert_array_equal(X, X2)  # both reorder in place, identically
    null = dom.astype(np.int64)
    for got, want in zip(kernel.class_ranges(X, bounds, null), mondrian.class_ranges(X2, bounds2, null)):
        np.testing.assert_array_equal(got, want)
    for a in range(X.shape[1]):
        col = X[:, a]  # a strided view, as the engine passes it
        np.testing.assert_array_equal(
            kernel.count_distinct(col, bounds, dom[a]), mondrian.count_distinct(col, bounds, dom[a])
        )
        for got, want in zip(
            kernel.class_distinct(col, bounds, dom[a], dom[a]), mondrian.class_distinct(col, bounds, dom[a], dom[a])
        ):
            np.testing.assert_array_equal(got, want)
        lookup = np.arange(dom[a] + 1, dtype=np.int64)[::-1].copy()
        np.testing.assert_array_equal(
            kernel.class_max_of(col, bounds, lookup), mondrian.class_max_of(col, bounds, lookup)
        )
    rand = np.random.default_rng(seed).integers(0, 2**62, len(perm), np.int64)
    np.testing.assert_array_equal(
        kernel.shuffle_blocks(perm.copy(), bounds, rand), mondrian.shuffle_blocks(perm2.copy(), bounds2, rand)
    )


def test_shuffle_blocks_draws_each_order_of_a_block_alike():
    """Rows stay in their block (their class), and each of a block's orders is
    as likely as another: the publication order gives nothing away."""
    bounds = np.array([0, 1, 4, 6], np.int64)  # blocks of 1, 3 and 2 rows
    rng = np.random.default_rng(7)
    counts: dict[tuple, int] = {}
    draws = 6000
    for _ in range(draws):
        got = kernel.shuffle_blocks(np.arange(6, dtype=np.int64), bounds, rng.integers(0, 2**62, 6, np.int64))
        assert got[0] == 0 and sorted(got[1:4]) == [1, 2, 3] and sorted(got[4:]) == [4, 5]
        key = tuple(got[1:4])
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6
    # Each of the 6 orders about 1,000 times (a binomial's sd is ~29: 6 sd apart).
    assert all(abs(c - draws / 6) < 175 for c in counts.values()), counts
    with pytest.raises(TypeError, match="int64"):
        kernel.shuffle_blocks(np.arange(6, dtype=np.int32), bounds, np.zeros(6, np.int64))


def test_a_failed_build_falls_back_to_the_jit_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SQLANON_CACHE_DIR", str(tmp_path))

    def no_compiler(directory, path):
        raise RuntimeError("no C compiler\nsecond line")

    monkeypatch.setattr(kernel, "_build", no_compiler)
    with caplog.at_level(logging.INFO, logger="sqlanon"):
        assert kernel._load() is mondrian
    marker = tmp_path / f"_mondrian_aot-{kernel.cache_key()}.failed"
    assert marker.read_text() == "RuntimeError: no C compiler\n"
    assert f"delete {marker} to try again" in caplog.text

    def must_not_build(directory, path):
        pytest.fail("a recorded failure must not be compiled again in every process")

    monkeypatch.setattr(kernel, "_build", must_not_build)
    assert kernel._load() is mondrian
    monkeypatch.setenv("SQLANON_KERNEL", "jit")
    monkeypatch.setenv("SQLANON_CACHE_DIR", str(tmp_path / "unused"))
    assert kernel._load() is mondrian
    assert not (tmp_path / "unused").exists()


def test_a_failed_builds_reason_is_not_cut_mid_advice(tmp_path, monkeypatch, caplog):
    """numba's words without a C compiler end their first line 'If using
    conda try:', and the warning ended there (helper-101)."""
    monkeypatch.setenv("SQLANON_CACHE_DIR", str(tmp_path))

    def no_compiler(directory, path):
        raise RuntimeError("Attempted to compile AOT function without the compiler used by numpy.distutils present. "
                           "If using conda try:\n\n#> conda install gcc_linux-64 gxx_linux-64")

    monkeypatch.setattr(kernel, "_build", no_compiler)
    assert kernel._load() is mondrian
    assert ("(RuntimeError: Attempted to compile AOT function without the compiler used by numpy.distutils "
            "present.); using numba's JIT") in caplog.text, caplog.text


def test_a_process_whose_kernel_source_changed_compiles_nothing(tmp_path, monkeypatch):
    """A process that imported the kernel's source, which then changed (an
    upgrade or an edit while it ran), compiled its old functions under the
    new source's key: every later process loaded them (helper-129). It is
    refused, and nothing is left that a later process would take."""
    monkeypatch.setenv("SQLANON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(mondrian, "SOURCE_DIGEST", "an older source")
    with pytest.raises(InputError, match="changed after this process imported it"):
        kernel._load()
    assert not list(tmp_path.glob("_mondrian_aot-*"))


def test_the_key_follows_the_kernel_source(tmp_path, monkeypatch):
    key = kernel.cache_key()
    changed = tmp_path / "mondrian.py"
    changed.write_bytes(kernel._SOURCE.read_bytes() + b"\n# changed\n")
    monkeypatch.setattr(kernel, "_SOURCE", changed)
    assert kernel.cache_key() != key


def test_the_key_and_the_build_follow_the_cpu(tmp_path, monkeypatch):
    """Compiled for this CPU where /proc/cpuinfo names it, and keyed by it:
    a CPU of other features sharing the cache builds a module of its own
    (instructions it lacks would kill the process). Unknown: generic code."""
    if kernel.cpu_identity():
        assert b"flags" in kernel.cpu_identity() or b"Features" in kernel.cpu_identity()
    keys = {}
    for cpu in (b"", b"flags\t: sse2", b"flags\t: sse2 avx2"):
        monkeypatch.setattr(kernel, "cpu_identity", lambda cpu=cpu: cpu)
        keys[cpu] = kernel.cache_key()
    assert len(set(keys.values())) == 3

    targets = []

    def compile_(cc):
        targets.append(cc.target_cpu)
        raise RuntimeError("not compiled in this test")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pycc is "pending deprecation" since numba 0.57 (kernel._build says so too)
        from numba.pycc import CC

    monkeypatch.setattr(CC, "compile", compile_)
    # a build killed mid-way (a Ctrl-C to the process group) left its directory for good (helper-201)
    (tmp_path / ".build-killed" / "x").mkdir(parents=True)
    for cpu in (b"flags\t: sse2", b""):
        monkeypatch.setattr(kernel, "cpu_identity", lambda cpu=cpu: cpu)
        with pytest.raises(RuntimeError, match="not compiled"):
            kernel._build(tmp_path, tmp_path / "m.so")
    assert targets == ["host", ""]
    assert list(tmp_path.iterdir()) == []  # its build directory is gone


@pytest.mark.slow  # two compilers at once, ~25 s of both cores
def test_concurrent_first_runs_compile_once_and_replace_a_broken_module(tmp_path):
    """Two processes start with a broken module in the cache: one compiles, the
    other waits and loads it. The build leaves nothing in the temporary
    directory (numba's compiler check left two directories there)."""
    broken = tmp_path / kernel._file_name(kernel.cache_key())
    broken.write_bytes(b"not an ELF file")
    tmp = tmp_path.parent / f"{tmp_path.name}-tmp"
    tmp.mkdir()
    env = {**os.environ, "SQLANON_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO), "TMPDIR": str(tmp)}
    env.pop("SQLANON_KERNEL", None)
    code = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stderr)\n"
        "from sqlanon import kernel\n"
        "print(kernel.load().__name__, 'numba' in sys.modules)\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    stderr = "".join(err for _, err in outs)
    assert stderr.count("compiling the Mondrian kernel") == 1, stderr
    assert stderr.count("ignoring the compiled kernel") >= 1, stderr
    # The waiting process loaded the new module without importing numba.
    assert sorted(out for out, _ in outs) == ["sqlanon._mondrian_aot False\n", "sqlanon._mondrian_aot True\n"], outs
    # (and numba's cache of the JIT kernel, made when the build imports the kernel's source)
    kept = sorted(p.name for p in tmp_path.iterdir() if p.name != "numba")
    assert kept == sorted([broken.name, "_mondrian_aot.lock"])
    assert list(tmp.iterdir()) == []


def test_needs_build_says_whether_a_load_compiles(tmp_path, monkeypatch):
    """The CLI tells a terminal why the first run waits; it asks this first."""
    monkeypatch.delenv("SQLANON_KERNEL", raising=False)
    monkeypatch.setenv("SQLANON_CACHE_DIR", str(tmp_path))
    assert kernel.needs_build()
    (tmp_path / kernel._file_name(kernel.cache_key())).write_bytes(b"")
    assert not kernel.needs_build()
    monkeypatch.setenv("SQLANON_CACHE_DIR", str(tmp_path / "other"))
    monkeypatch.setenv("SQLANON_KERNEL", "jit")
    assert not kernel.needs_build()


def test_an_unknown_kernel_setting_is_said(monkeypatch, caplog):
    """SQLANON_KERNEL=bogus was ignored without a word (helper-6)."""
    monkeypatch.setenv("SQLANON_KERNEL", "bogus")
    kernel._load()
    assert "SQLANON_KERNEL='bogus' is neither 'jit' nor 'auto'" in caplog.text


def test_nowhere_to_compile_is_said(tmp_path, monkeypatch, caplog):
    """An unwritable SQLANON_CACHE_DIR ran every process through the JIT, a
    second more each, without a word (helper-51)."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("SQLANON_CACHE_DIR", str(tmp_path / "file" / "cache"))  # no directory can be made there
    monkeypatch.setattr(kernel, "_build", lambda directory, path: pytest.fail("nowhere to build"))
    assert kernel._load() is mondrian
    assert (f"no directory to compile the Mondrian kernel in ({tmp_path / 'file' / 'cache'} cannot be written); "
            "using numba's JIT") in caplog.text


def test_a_cache_every_user_may_write_to_is_not_used(tmp_path, monkeypatch, caplog):
    """The compiled kernel is loaded as code from the cache: one that every
    user may write to (made under umask 000, or a shared directory chosen)
    would run another user's file as this one (helper-165). Such a place is
    left out, and said; the places the run makes are their owner's alone."""
    from sqlanon import cache

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("SQLANON_CACHE_DIR", str(shared))
    monkeypatch.setattr(kernel, "_build", lambda directory, path: pytest.fail("built in a shared place"))
    assert cache.cache_dirs() == [] and cache.writable_dir() is None
    assert kernel._load() is mondrian
    # (said as such: it read 'no writable directory … (none)', of a writable one: helper-182)
    assert (f"no directory to compile the Mondrian kernel in (none to use; {shared} is not used, as every user may "
            "write to it: a kernel there could be another user's code); using numba's JIT") in caplog.text
    made = tmp_path / "open" / "cache"
    monkeypatch.setenv("SQLANON_CACHE_DIR", str(made))
    old = os.umask(0)
    try:
        assert cache.writable_dir() == made
    finally:
        os.umask(old)
    assert made.stat().st_mode & 0o777 == 0o700


def test_no_home_directory_leaves_the_package_cache(monkeypatch):
    """Without HOME, a uid that has no passwd entry made every command an
    internal error ('Could not determine home directory'), verify too,
    whose template cache is only faster (helper-101)."""
    from sqlanon import cache

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("SQLANON_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert cache.cache_dirs() == [Path(cache.__file__).parent / "__pycache__"]


@pytest.mark.slow  # numba compiles the kernel from nothing in each: ~25 s
@pytest.mark.parametrize("place", ["ours", "numba's", "none"])
def test_the_jit_kernel_caches_in_sqlanons_place_or_numbas_or_nowhere(tmp_path, place, caplog):
    """numba's cache of the JIT kernel stayed in the package directory or
    ~/.cache/numba whatever SQLANON_CACHE_DIR said (in a directory named '~'
    of the current one when HOME was unset), and where numba could write
    nowhere every run failed ('cannot cache function …: no locator
    available') after the warning that the JIT is used (helper-101). An
    unwritable SQLANON_CACHE_DIR leaves numba its own places (helper-103:
    the first fix compiled the kernel in every process then, ~30 s each),
    and a host's own cached function keeps them too."""
    (tmp_path / "file").write_text("")
    cache = tmp_path / "cache" if place == "ours" else tmp_path / "file" / "cache"  # nothing is made in a file
    (tmp_path / "host.py").write_text("import numba\n\n@numba.njit(cache=True)\ndef f(x):\n    return x + 1\n")
    # (where nothing is writable the compiled kernel's load says why the JIT runs)
    env = {**os.environ, "SQLANON_CACHE_DIR": str(cache), "SQLANON_KERNEL": "auto" if place == "none" else "jit",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)])}
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("HOME", None)
    code = ("import logging, sys; logging.basicConfig(level=logging.WARNING, stream=sys.stderr)\n"
            "import numba.core.caching\n"
            + ("numba.core.caching.FunctionCache._impl_class._locator_classes = []  # nowhere to write\n"
               if place == "none" else "")
            + "from sqlanon import cache, kernel, mondrian\n"
              "assert kernel.load() is mondrian\n"
            + ("" if place == "none" else "import host\nassert host.f(1) == 2\n")
            + "print(cache.UNCACHED)\n")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(place == "none")]
    if place == "ours":
        assert list((cache / "numba").rglob("*.nbi")), "numba cached nothing there"
        assert not any("host" in f.name for f in (cache / "numba").rglob("*")), "a host's function cached there"
    if place == "none":
        assert "which cannot cache it either: compiled again in every process" in p.stderr, p.stderr
    else:
        assert list((tmp_path / "__pycache__").glob("host.f-*.nbi")), "the host's function left numba's place"
    assert not (tmp_path / "~").exists()


def test_the_worker_pools_warnings_read_as_the_clis(tmp_path):
    """The fork server loads the kernel, and said its warnings bare, without
    the 'Warning: ' every other warning of the CLI has (helper-51)."""
    src = tmp_path / "s.csv"
    src.write_text("age\n" + "\n".join(str(20 + i % 30) for i in range(200)) + "\n")
    p = subprocess.run([sys.executable, "-m", "sqlanon", "anonymize", str(src), "-o", str(tmp_path / "o.parquet"),
                        "--qi", "age", "-k", "5", "--workers", "2", "-q"], capture_output=True, text=True,
                       env={**os.environ, "SQLANON_KERNEL": "bogus"}, timeout=300)
    assert p.returncode == 0, p.stderr
    said = [ln for ln in p.stderr.splitlines() if "SQLANON_KERNEL" in ln]
    assert said and all(ln.startswith("Warning: SQLANON_KERNEL='bogus' is neither") for ln in said), p.stderr


def test_the_pools_log_format_leaves_the_callers_own_pools_alone(tmp_path):
    """The format above was a root handler in the fork server, which the
    caller's own forkserver pools share: their workers' basicConfig did
    nothing, their INFO lines and tracebacks were lost (helper-52)."""
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent(f"""
        import logging, multiprocessing, sys
        from concurrent.futures import ProcessPoolExecutor

        def job():
            logging.basicConfig(level=logging.INFO, format="CALLER %(levelname)s %(message)s", stream=sys.stdout)
            try:
                1 / 0
            except ZeroDivisionError:
                logging.getLogger("caller").exception("failed")
            logging.getLogger("caller").info("said")

        if __name__ == "__main__":
            import pyarrow as pa, pyarrow.parquet as pq, sqlanon
            pq.write_table(pa.table({{"age": list(range(40))}}), {str(tmp_path / "s.parquet")!r})
            sqlanon.anonymize({str(tmp_path / "s.parquet")!r}, {str(tmp_path / "o.parquet")!r}, qi=["age"], k=5,
                              workers=2)
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")) as ex:
                ex.submit(job).result()
    """))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("CALLER ERROR failed\nTraceback") and "ZeroDivisionError" in p.stdout, p.stdout
    assert p.stdout.rstrip().endswith("CALLER INFO said"), p.stdout


def _same_classes(got, want) -> None:
    """Two partitions hold the same classes, in the same order (rows within a class in any order)."""
    (perm, bounds), (perm2, bounds2) = got, want
    np.testing.assert_array_equal(bounds, bounds2)
    for a, b in zip(bounds[:-1], bounds[1:]):
        np.testing.assert_array_equal(np.sort(perm[a:b]), np.sort(perm2[a:b]))


@pytest.mark.parametrize("seed", range(6))
def test_partition_matches_a_plain_numpy_recursion(seed):
    """The compiled kernel cuts as examples/bench_kernels.py's plain numpy
    recursion of the same rule does (written apart from it: per node, the
    min and max of every column from the node's rows)."""
    from examples.bench_kernels import _numba_args, kernel_numpy_recursive

    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(50, 4000)), int(rng.integers(1, 8))
    dom = rng.integers(1, 30, d)
    X = np.column_stack([rng.integers(0, dm + 1, n) for dm in dom]).astype(np.int32)
    S = rng.integers(0, int(rng.integers(2, 6)), (n, 1)).astype(np.int32)
    k, l = int(rng.integers(2, 12)), int(rng.integers(1, 3))
    span = dom.astype(np.int64)
    want = kernel_numpy_recursive(X.copy(), S.copy(), k, l, span)
    got = kernel.partition(X.copy(), S.copy(), k, l, *_numba_args(X, S, span))
    _same_classes(got, want)


def test_partition_of_a_tree_deeper_than_its_first_stack():
    """A left spine 70 cuts deep: column g peels off the 2k rows whose value
    there is 1, and the rest (0) is cut again on column g + 1. Each peeled
    block waits on the stack, and is cut once more on the last column (0 or
    1 within it): the stack of pending blocks, with their min and max,
    grows past its first 64 entries and must keep them."""
    from examples.bench_kernels import _numba_args, kernel_numpy_recursive

    d, k = 70, 2
    X = np.zeros(((d + 1) * 2 * k, d + 1), np.int32)
    for g in range(d):
        X[g * 2 * k:(g + 1) * 2 * k, g] = 1
    X[:, d] = np.tile([0] * k + [1] * k, d + 1)
    S = np.zeros((len(X), 1), np.int32)
    span = np.ones(d + 1, np.int64)
    got = kernel.partition(X.copy(), S.copy(), k, 1, *_numba_args(X, S, span))
    assert len(got[1]) - 1 == 2 * (d + 1)  # every block of 2k rows cut in two
    _same_classes(got, kernel_numpy_recursive(X.copy(), S.copy(), k, 1, span))
    jit = mondrian.partition(X.copy(), S.copy(), k, 1, *_numba_args(X, S, span))
    _same_classes(got, jit)


def _bound_by_numpy(x, S, t, l, k):
    """The least DP the two sides of the cut ``x <= t`` could reach, as
    :func:`sqlanon.mondrian._cut_bounds` defines it, by brute force: per side
    ``n * n / q``, ``q`` the least of ``n / k`` and, per sensitive column, the
    most classes (up to ``n // k + 1``) with ``l`` distinct codes each."""
    total = 0.0
    for side in (x <= t, x > t):
        n = int(side.sum())
        q = n / k
        for s in range(S.shape[1]):
            cnt = np.bincount(S[side, s])
            q = min(q, max(q_ for q_ in range(n // k + 2) if np.minimum(cnt, q_).sum() >= l * q_))
        total += n * n / max(q, 1.0)
    return total


@pytest.mark.parametrize("seed", range(6))
def test_cut_bounds_match_a_numpy_count_and_leave_their_counts_zero(seed):
    """One scan gives both cuts' bounds; the shared count arrays are zero again after each call."""
    rng = np.random.default_rng(seed)
    n, d, n_s = int(rng.integers(20, 400)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    X = rng.integers(0, 12, (n, d)).astype(np.int32)
    sdom = rng.integers(2, 9, n_s)
    S = np.column_stack([rng.integers(0, dm, n) for dm in sdom]).astype(np.int32)
    s_off = np.concatenate([[0], np.cumsum(sdom + 1)]).astype(np.int64)
    cnt = np.zeros((4, s_off[-1] + 1), np.int64)
    seen = np.empty((4, s_off[-1] + 1), np.int64)
    for _ in range(5):
        start = int(rng.integers(0, n // 2))
        end = int(rng.integers(start + 2, n + 1))
        a = int(rng.integers(0, d))
        t0, t1 = (int(t) for t in rng.choice(12, 2, replace=False))  # either order
        l, k = int(rng.integers(1, 4)), int(rng.integers(1, 6))
        x, Sb = X[start:end, a], S[start:end]
        got = mondrian._cut_bounds(X, S, start, end, a, t0, int((x <= t0).sum()), t1, int((x <= t1).sum()), l, k,
                                   s_off, cnt, seen)
        assert got == (_bound_by_numpy(x, Sb, t0, l, k), _bound_by_numpy(x, Sb, t1, l, k))
        assert not cnt.any()
