"""Worker part files: pyarrow writes the parts that are only a way to the
output, DuckDB the others; DuckDB must read either back the same."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sqlanon import io
from sqlanon.config import AnonymizationSpec, QuasiIdentifier
from sqlanon.engine import anonymize_table
from sqlanon.errors import InputError

# Each a DuckDB expression of a column, as a worker's fragment hands it to Arrow.
FLAT = {
    "boolean": "[true, false, NULL]",
    "tinyint": "[-128, 127, NULL]::TINYINT[]",
    "smallint": "[-32768, 32767, NULL]::SMALLINT[]",
    "integer": "[-2147483648, 2147483647, NULL]::INTEGER[]",
    "bigint": "[-9223372036854775808, 9223372036854775807, NULL]::BIGINT[]",
    "utinyint": "[0, 255, NULL]::UTINYINT[]",
    "usmallint": "[0, 65535, NULL]::USMALLINT[]",
    "uinteger": "[0, 4294967295, NULL]::UINTEGER[]",
    "ubigint": "[0, 18446744073709551615, NULL]::UBIGINT[]",
    "hugeint": "[-170141183460469231731687303715884105727, 0, NULL]::HUGEINT[]",
    "float": "['-0.0', '0.0', 'nan', '-inf', '1.5', NULL]::FLOAT[]",
    "double": "['-0.0', '0.0', 'nan', 'inf', '5e-324', NULL]::DOUBLE[]",
    "decimal": "[1.25, -0.01, NULL]::DECIMAL(4,2)[]",
    "decimal38": "[12345678901234567890.123456789, NULL]::DECIMAL(38,9)[]",
    "varchar": "['a\"b', 'O''Brien', '', 'é', NULL]",
    "blob": "['\\x00\\xff'::BLOB, NULL]",
    "date": "['2020-02-29', '0001-01-01', '9999-12-31', 'infinity', NULL]::DATE[]",
    "time": "['00:00:00', '23:59:59.999999', NULL]::TIME[]",
    "timestamp": "['2020-01-01 01:02:03.456789', '-infinity', NULL]::TIMESTAMP[]",
    "timestamp_s": "['2020-01-01 01:02:03', NULL]::TIMESTAMP_S[]",
    "timestamp_ms": "['2020-01-01 01:02:03.456', NULL]::TIMESTAMP_MS[]",
    "timestamp_ns": "['2020-01-01 01:02:03.456789123', NULL]::TIMESTAMP_NS[]",
    "timestamptz": "['2020-06-01 01:02:03.5+02', NULL]::TIMESTAMPTZ[]",
    "uuid": "['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', NULL]::UUID[]",
    "json": "['{\"a\": [1, 2]}', NULL]::JSON[]",
    "enum": "['x', 'y', NULL]::ENUM('x', 'y')[]",
    "all_null": "[NULL, NULL]::VARCHAR[]",
}
# Types pyarrow cannot write, or would store otherwise: DuckDB writes these parts.
OTHER = {
    "interval": "[INTERVAL 1 MONTH, NULL]",
    "uhugeint": "[1, NULL]::UHUGEINT[]",
    "list": "[[1.5, -0.0], NULL]",
    "struct": "[{'a': 1}, NULL]",
}


def _column(con, expr: str) -> pa.Table:
    return con.execute(f"SELECT unnest({expr}) AS \"c\", range AS \"row\" FROM range(1)").fetch_arrow_table()


def _writer(path: Path) -> str:
    created_by = pq.ParquetFile(path).metadata.created_by
    return "pyarrow" if created_by.startswith("parquet-cpp-arrow") else "duckdb" if "DuckDB" in created_by else created_by


def _read_back(con, path: Path) -> tuple[list, list]:
    rel = f"read_parquet('{path}')"
    types = [tuple(r[:2]) for r in con.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall()]
    rows = con.execute(
        f"SELECT CAST(\"c\" AS VARCHAR), signbit(TRY_CAST(\"c\" AS DOUBLE)) FROM {rel} ORDER BY ALL"
    ).fetchall()
    return types, rows


@pytest.mark.parametrize("name", sorted(FLAT))
def test_pyarrow_part_reads_back_as_duckdb_part(tmp_path: Path, name: str) -> None:
    con = io.connect(threads=1)
    table = _column(con, FLAT[name])
    assert table.num_rows >= 2
    fast, slow = tmp_path / "fast.parquet", tmp_path / "slow.parquet"
    io.write_part(con, table, str(fast), "lz4")
    io.write_part(con, table, str(slow), "lz4", is_output=True)
    assert (_writer(fast), _writer(slow)) == ("pyarrow", "duckdb")
    assert _read_back(con, fast) == _read_back(con, slow)
    # Value for value against the fragment itself, -0.0 included.
    con.register("src", table)
    want = con.execute(
        "SELECT CAST(\"c\" AS VARCHAR), signbit(TRY_CAST(\"c\" AS DOUBLE)) FROM src ORDER BY ALL"
    ).fetchall()
    assert _read_back(con, fast)[1] == want


def test_negative_zero_kept_apart_in_a_long_column(tmp_path: Path) -> None:
    # Long enough for a dictionary: DuckDB's writer would make every 0.0 one sign.
    con = io.connect(threads=1)
    table = con.execute(
        "SELECT CASE WHEN range % 2 = 0 THEN '-0.0'::DOUBLE ELSE 0.0::DOUBLE END AS z FROM range(50000)"
    ).fetch_arrow_table()
    con.register("src", table)
    assert con.execute("SELECT count(*) FILTER (WHERE signbit(z)) FROM src").fetchone()[0] == 25000
    path = tmp_path / "z.parquet"
    io.write_part(con, table, str(path), "lz4")
    assert _writer(path) == "pyarrow"
    negative = con.execute(f"SELECT count(*) FILTER (WHERE signbit(z)) FROM read_parquet('{path}')").fetchone()[0]
    assert negative == 25000


@pytest.mark.parametrize("name", sorted(OTHER))
def test_other_types_are_written_by_duckdb(tmp_path: Path, name: str) -> None:
    con = io.connect(threads=1)
    table = _column(con, OTHER[name])
    path = tmp_path / "part.parquet"
    io.write_part(con, table, str(path), "lz4")
    assert _writer(path) == "duckdb"
    assert con.execute(f"SELECT count(*) FROM read_parquet('{path}')").fetchone()[0] == table.num_rows


def test_columns_written_as_text_go_through_duckdb(tmp_path: Path) -> None:
    con = io.connect(threads=1)
    table = _column(con, FLAT["bigint"])
    path = tmp_path / "part.parquet"
    io.write_part(con, table, str(path), "lz4", as_text=("c",))
    assert _writer(path) == "duckdb"
    assert con.execute(f"SELECT typeof(\"c\") FROM read_parquet('{path}') LIMIT 1").fetchone()[0] == "VARCHAR"


def test_an_anonymized_fragment_is_written_by_pyarrow(tmp_path: Path) -> None:
    con = io.connect(threads=1)
    source = con.execute(
        "SELECT range % 97 AS age, 'z' || (range % 13) AS zip, (range % 3)::INTEGER AS disease, range AS id "
        "FROM range(5000)"
    ).fetch_arrow_table()
    spec = AnonymizationSpec((QuasiIdentifier("age"), QuasiIdentifier("zip")), k=5, l=2, sensitive=("disease",))
    out = anonymize_table(source, spec).table
    assert pa.types.is_dictionary(out.schema.field("age").type)  # the generalized QIs
    fast, slow = tmp_path / "fast.parquet", tmp_path / "slow.parquet"
    io.write_part(con, out, str(fast), "lz4")
    io.write_part(con, out, str(slow), "lz4", is_output=True)
    assert _writer(fast) == "pyarrow"
    assert pq.ParquetFile(fast).metadata.row_group(0).num_rows == 5000
    diff = con.execute(
        f"SELECT count(*) FROM (SELECT * FROM read_parquet('{fast}') EXCEPT ALL SELECT * FROM read_parquet('{slow}'))"
    ).fetchone()[0]
    assert diff == 0
    assert con.execute(f"DESCRIBE SELECT * FROM read_parquet('{fast}')").fetchall() == \
        con.execute(f"DESCRIBE SELECT * FROM read_parquet('{slow}')").fetchall()


def test_a_part_pyarrow_cannot_write_is_written_by_duckdb(tmp_path: Path) -> None:
    """A dictionary that holds a NULL among its values: pyarrow's writer
    refuses it ('not yet supported'); DuckDB's writes it."""
    con = io.connect(threads=1)
    column = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, None], pa.int32()), pa.array(["a", None, "b"]))
    path = tmp_path / "part.parquet"
    io.write_part(con, pa.table({"c": column, "n": [1, 2, 3, 4]}), str(path), "lz4")
    assert _writer(path) == "duckdb"
    assert con.execute(f"SELECT list(c ORDER BY n) FROM read_parquet('{path}')").fetchone()[0] == ["a", None, "b", None]


def test_a_part_that_cannot_be_written_names_it(tmp_path: Path) -> None:
    con = io.connect(threads=1)
    path = tmp_path / "missing" / "part.parquet"
    with pytest.raises(InputError, match=r"cannot write '.*missing/part\.parquet'"):
        io.write_part(con, _column(con, FLAT["integer"]), str(path), "lz4")


def test_an_output_of_long_generalized_texts_is_written_from_the_parts_dictionaries(tmp_path, monkeypatch):
    """A set of ~450 names a row (~6 KB): DuckDB's COPY of the parts into
    the output decoded every row's text, 11.6 s and a 6 GB peak for 1M rows;
    pyarrow writes the parts' dictionaries as they are. The same rows either
    way; short texts stay DuckDB's to write (it reads its own files faster)."""
    import duckdb

    import sqlanon

    n = 9_000
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"name": [f"name{i:09d}" for i in range(n)],
                             "dx": ["rare" if i % 450 == 0 else "common" for i in range(n)],
                             "id": list(range(n))}), src)
    run = dict(qi=["name"], sensitive=["dx"], k=2, l=2, workers=2, fragments=2)
    monkeypatch.setattr(io, "PARQUET_ROW_GROUP_ROWS", 2048)  # (4,500-row parts: row groups the concatenation takes)
    sqlanon.anonymize(src, tmp_path / "arrow.parquet", **run)
    assert pq.ParquetFile(tmp_path / "arrow.parquet").metadata.created_by.startswith("parquet-cpp-arrow")
    monkeypatch.setattr(io.Staging, "write_with_arrow", lambda self, path: False)
    monkeypatch.setattr(io.Staging, "concatenate_parts", lambda self, path, compression: False)
    sqlanon.anonymize(src, tmp_path / "duck.parquet", **run)
    assert pq.ParquetFile(tmp_path / "duck.parquet").metadata.created_by.startswith("DuckDB")
    rows = [duckdb.sql(f"SELECT * FROM '{tmp_path / f}' ORDER BY id").fetchall() for f in ("arrow.parquet",
                                                                                          "duck.parquet")]
    assert rows[0] == rows[1] and len(rows[0]) == n and len(rows[0][0][0]) > 1024
    assert pq.read_schema(tmp_path / "arrow.parquet") == pq.read_schema(tmp_path / "duck.parquet")
    monkeypatch.undo()
    monkeypatch.setattr(io, "PARQUET_ROW_GROUP_ROWS", 2048)
    short = tmp_path / "short.parquet"
    sqlanon.anonymize(src, short, **{**run, "qi": ["id"]})
    # (short texts: the parts' row groups copied as they are, io.Staging.concatenate_parts)
    assert pq.ParquetFile(short).metadata.created_by.startswith("parquet-cpp-arrow")
    # A DuckDB table's TIMESTAMP_MS: pyarrow keeps milliseconds, which pandas reads so, where DuckDB
    # writes microseconds (helper-73): DuckDB's to write.
    db = tmp_path / "in.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE t AS SELECT *, make_timestamp(id * 1000)::TIMESTAMP_MS AS at FROM '{src}'")
    sqlanon.anonymize(db, tmp_path / "ms.parquet", table="t", **run)
    assert pq.ParquetFile(tmp_path / "ms.parquet").metadata.created_by.startswith("DuckDB")
    assert pq.read_schema(tmp_path / "ms.parquet").field("at").type == pa.timestamp("us")


def test_parts_that_cannot_be_read_fail_in_one_line_and_leave_no_output(tmp_path):
    """A part pyarrow cannot read (a truncated file): the writer's raw
    ArrowInvalid escaped, and a partial output stayed (helper-73)."""
    staging = io.Staging(tmp_path / "staging")
    staging.parts_dir.mkdir(parents=True)
    long_text = pa.array(["x" * 2_000] * 10)
    pq.write_table(pa.table({"s": long_text}), staging.parts_dir / "part-00000.parquet")
    (staging.parts_dir / "part-00001.parquet").write_bytes(b"PAR1 truncated")
    out = tmp_path / "out.parquet"
    with pytest.raises(InputError, match=r"cannot write '.*out.parquet' from the parts: .*magic bytes"):
        staging.write_with_arrow(str(out))
    assert not out.exists()


NOT_CONCATENATED = {"timestamp_s", "timestamp_ms"}  # pyarrow writes them as milliseconds, DuckDB as microseconds


@pytest.mark.parametrize("name", sorted(FLAT))
def test_parts_concatenated_read_back_as_duckdbs_copy(tmp_path: Path, name: str, monkeypatch) -> None:
    """A Parquet output assembled by copying the parts' row groups as they are
    (footer rewritten) reads back as DuckDB's COPY of the same parts, value for
    value and type for type; a column pyarrow cannot write as DuckDB does is
    left to DuckDB's COPY."""
    import duckdb

    from sqlanon import parquet_concat

    monkeypatch.setattr(io, "PARQUET_ROW_GROUP_ROWS", 2)  # parts of a few rows: row groups of their size
    con = io.connect()
    tables = [_column(con, FLAT[name]) for _ in range(2)]
    staging = io.Staging(tmp_path / "stage")
    staging.parts_dir.mkdir(parents=True, exist_ok=True)
    for i, table in enumerate(tables):
        io.write_part(con, table, staging.part_path(i), "zstd")
    out = tmp_path / "out.parquet"
    done = staging.concatenate_parts(str(out), "zstd")
    text = "SELECT CAST(\"c\" AS VARCHAR), signbit(TRY_CAST(\"c\" AS DOUBLE)), \"row\" FROM {}"
    expected = con.execute(text.format(staging.parts_relation())).fetchall()
    if not done:
        assert not out.exists()
        assert name in NOT_CONCATENATED
        return
    assert name not in NOT_CONCATENATED
    assert pq.ParquetFile(out).metadata.num_rows == sum(t.num_rows for t in tables)
    assert con.execute(text.format(f"read_parquet('{out}')")).fetchall() == expected
    assert con.execute(f"DESCRIBE SELECT * FROM read_parquet('{out}')").fetchall() == con.execute(
        f"DESCRIBE SELECT * FROM {staging.parts_relation()}").fetchall()
    # As pyarrow (and pandas) read it: the types of DuckDB's COPY of the parts
    copied = tmp_path / "copied.parquet"
    io.copy_relation(con, f"(SELECT * FROM {staging.parts_relation()})", str(copied), "parquet")
    assert pq.read_schema(out).remove_metadata() == pq.read_schema(copied).remove_metadata()
    try:
        want = pq.read_table(copied).to_pandas().dtypes
    except ValueError:  # a date pandas cannot hold ('infinity'): then neither
        with pytest.raises(ValueError):
            pq.read_table(out).to_pandas()
    else:
        assert pq.read_table(out).to_pandas().dtypes.equals(want)
    # each footer's thrift round-trips byte for byte
    for f in [*staging.parts_dir.glob("*.parquet"), out]:
        size, start, meta = parquet_concat.read_footer(f)
        w = parquet_concat._Writer()
        w.struct(meta)
        assert bytes(w.out) == Path(f).read_bytes()[start:-8] and size == Path(f).stat().st_size


def test_parts_of_other_schemas_or_codecs_are_left_to_duckdb(tmp_path: Path) -> None:
    con = io.connect()
    staging = io.Staging(tmp_path / "stage")
    staging.parts_dir.mkdir(parents=True, exist_ok=True)
    io.write_part(con, pa.table({"a": pa.array(["x"])}), staging.part_path(0), "zstd")
    io.write_part(con, pa.table({"a": pa.array([1])}), staging.part_path(1), "zstd")
    assert not staging.concatenate_parts(str(tmp_path / "o.parquet"), "zstd")
    Path(staging.part_path(1)).unlink()
    io.write_part(con, pa.table({"a": pa.array(["y"])}), staging.part_path(1), "lz4")
    assert not staging.concatenate_parts(str(tmp_path / "o.parquet"), "zstd")
    assert not (tmp_path / "o.parquet").exists()


def test_many_small_parts_are_left_to_duckdb(tmp_path: Path) -> None:
    """Row groups of a few rows each (64 fragments of 1M rows, 15,600 rows a
    part) would be the file's: DuckDB's COPY writes 122,880-row groups."""
    con = io.connect()
    staging = io.Staging(tmp_path / "stage")
    staging.parts_dir.mkdir(parents=True, exist_ok=True)
    for i in range(2):
        io.write_part(con, pa.table({"a": pa.array(["x"] * 1000)}), staging.part_path(i), "zstd")
    assert not staging.concatenate_parts(str(tmp_path / "o.parquet"), "zstd")
    assert not (tmp_path / "o.parquet").exists()


def test_a_parquet_output_of_concatenated_parts_is_the_copys_row_for_row(tmp_path, monkeypatch):
    """Poker-like rows in two fragments: the output assembled by concatenating
    the parts is DuckDB's COPY of them row for row (the within-class shuffle
    seeded alike for both runs), and its metrics are the same."""
    import numpy as np

    import sqlanon
    from sqlanon import engine

    rng = np.random.default_rng(1)
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({f"q{i}": rng.integers(0, 13, 20_000) for i in range(4)}
                            | {"s": rng.integers(0, 5, 20_000)}), src)
    run = dict(qi=["q0", "q1", "q2", "q3"], sensitive=["s"], k=5, l=2, workers=1, fragments=2)
    monkeypatch.setattr(io, "PARQUET_ROW_GROUP_ROWS", 2048)  # 10,000-row parts: row groups of 2,048 rows
    orig = np.random.default_rng
    monkeypatch.setattr(engine.np.random, "default_rng", lambda seed=None: orig(7 if seed is None else seed))
    a = sqlanon.anonymize(src, tmp_path / "cat.parquet", **run)
    monkeypatch.setattr(io.Staging, "concatenate_parts", lambda self, path, compression: False)
    monkeypatch.setattr(engine.np.random, "default_rng", lambda seed=None: orig(7 if seed is None else seed))
    b = sqlanon.anonymize(src, tmp_path / "copy.parquet", **run)
    assert pq.ParquetFile(tmp_path / "cat.parquet").metadata.created_by.startswith("parquet-cpp-arrow")
    assert pq.ParquetFile(tmp_path / "copy.parquet").metadata.created_by.startswith("DuckDB")
    assert pq.read_table(tmp_path / "cat.parquet").equals(pq.read_table(tmp_path / "copy.parquet"))
    assert a.metrics == b.metrics and a.verification == b.verification


def test_joined_parts_keep_unset_offsets_leave_out_empty_groups_and_are_as_small_as_duckdbs(tmp_path: Path,
                                                                                           monkeypatch) -> None:
    """helper-185: a chunk's file_offset of 0 (none, as pyarrow writes it)
    was moved into the data, and an empty part's empty row group (data page
    offset 0) pointed into the part before; columns of many values written
    in dictionaries, decimals as bytes, made the output a third larger than
    DuckDB's copy. A failure midway leaves no file."""
    import decimal

    import numpy as np

    from sqlanon import parquet_concat

    monkeypatch.setattr(io, "PARQUET_ROW_GROUP_ROWS", 4096)
    rng = np.random.default_rng(3)
    con = io.connect()
    staging = io.Staging(tmp_path / "stage")
    staging.parts_dir.mkdir(parents=True, exist_ok=True)

    def table(n: int) -> pa.Table:
        return pa.table({"d": rng.random(n), "ts": pa.array(rng.integers(0, 10**15, n), pa.timestamp("us")),
                         "dec": pa.array([decimal.Decimal(int(x)) / 100 for x in rng.integers(0, 10**9, n)],
                                         pa.decimal128(12, 2)),
                         "s": pa.array(rng.choice(["a", "b", "c"], n))})

    for i, n in enumerate((20_000, 0, 20_000)):
        io.write_part(con, table(n), staging.part_path(i), "zstd")
    out = tmp_path / "out.parquet"
    assert staging.concatenate_parts(str(out), "zstd")
    meta = pq.ParquetFile(out).metadata
    assert meta.num_rows == 40_000 and all(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
    assert {meta.row_group(i).column(j).file_offset for i in range(meta.num_row_groups)
            for j in range(meta.num_columns)} == {0}
    copied = tmp_path / "copied.parquet"
    io.copy_relation(con, f"(SELECT * FROM {staging.parts_relation()})", str(copied), "parquet")
    assert con.execute(f"SELECT * FROM read_parquet('{out}')").fetchall() == con.execute(
        f"SELECT * FROM read_parquet('{copied}')").fetchall()
    assert out.stat().st_size < 1.05 * copied.stat().st_size
    out.unlink()

    def cut_short(src, dst, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(parquet_concat, "_copy_range", cut_short)
    with pytest.raises(InputError, match=r"cannot write '.*out.parquet' from the parts: .*the disk is full"):
        staging.concatenate_parts(str(out), "zstd")
    assert not out.exists()
