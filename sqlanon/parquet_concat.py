"""Parquet files joined into one without decoding them: their row groups
copied as bytes, one footer written over them.

A run's Parquet output was assembled by DuckDB reading the workers' parts
and writing them again: 0.3 s of a 1.6 s run of 1M rows went to encoding
its text columns a second time (BENCHMARKS section 2, forty-eighth
session). The parts' column chunks hold no absolute position but their
footer's, so they can be copied as they are, one part after the other,
and the footer of the first rewritten: every row group of every part,
its offsets moved by where its part now starts.

The footer is Thrift's compact protocol. It is read and written here
field by field without a schema (each field keeps its id, type and value,
unknown ones too), so that what is written is what pyarrow wrote, but for
the offsets below; a footer this reader does not take is left to DuckDB.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import Any, BinaryIO

# Thrift compact protocol types.
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)

# Field ids of parquet.thrift (the format's own numbering).
FILE_SCHEMA, FILE_ROWS, FILE_ROW_GROUPS, FILE_KEY_VALUES = 2, 3, 4, 5
FILE_ENCRYPTION, FILE_SIGNING_KEY = 8, 9
GROUP_COLUMNS, GROUP_ROWS, GROUP_FILE_OFFSET, GROUP_ORDINAL = 1, 3, 5, 7
CHUNK_FILE_PATH, CHUNK_FILE_OFFSET, CHUNK_META = 1, 2, 3
CHUNK_OFFSET_INDEX, CHUNK_COLUMN_INDEX, CHUNK_CRYPTO, CHUNK_ENCRYPTED_META = 4, 6, 8, 9
META_DATA_PAGE, META_INDEX_PAGE, META_DICTIONARY_PAGE, META_BLOOM_FILTER = 9, 10, 11, 14

Field = list  # [field id, compact type, value]: a value of a nested struct is its list of fields


class _Reader:
    """Thrift compact values from ``buf``, from ``pos`` on."""

    def __init__(self, buf: memoryview, pos: int = 0) -> None:
        self.buf, self.pos = buf, pos

    def byte(self) -> int:
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, t: int) -> Any:
        if t in (TRUE, FALSE, BYTE):  # a boolean in a list is a byte of its own
            return self.byte()
        if t in (I16, I32, I64):
            return self.zigzag()
        if t in (DOUBLE, BINARY):
            n = 8 if t == DOUBLE else self.varint()
            v = bytes(self.buf[self.pos:self.pos + n])
            self.pos += n
            return v
        if t in (LIST, SET):
            head = self.byte()
            size, element = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            return (element, [self.value(element) for _ in range(size)])
        if t == MAP:
            size = self.varint()
            if not size:
                return (0, 0, [])
            kinds = self.byte()
            key, value = kinds >> 4, kinds & 0x0F
            return (key, value, [(self.value(key), self.value(value)) for _ in range(size)])
        if t == STRUCT:
            return self.struct()
        raise ValueError(f"Thrift type {t}")

    def struct(self) -> list[Field]:
        fields: list[Field] = []
        last = 0
        while True:
            head = self.byte()
            t = head & 0x0F
            if t == STOP:
                return fields
            delta = head >> 4
            fid = last + delta if delta else self.zigzag()
            fields.append([fid, t, t == TRUE] if t in (TRUE, FALSE) else [fid, t, self.value(t)])
            last = fid


class _Writer:
    """Thrift compact values written to ``out``, as :class:`_Reader` reads them."""

    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, n: int) -> None:
        while n >= 0x80:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def zigzag(self, n: int) -> None:
        self.varint((n << 1) ^ (n >> 63))

    def value(self, t: int, v: Any) -> None:
        if t in (TRUE, FALSE, BYTE):
            self.out.append(v)
        elif t in (I16, I32, I64):
            self.zigzag(v)
        elif t in (DOUBLE, BINARY):
            if t == BINARY:
                self.varint(len(v))
            self.out += v
        elif t in (LIST, SET):
            element, items = v
            if len(items) < 15:
                self.out.append(len(items) << 4 | element)
            else:
                self.out.append(0xF0 | element)
                self.varint(len(items))
            for item in items:
                self.value(element, item)
        elif t == MAP:
            key, value, items = v
            self.varint(len(items))
            if items:
                self.out.append(key << 4 | value)
                for k, x in items:
                    self.value(key, k)
                    self.value(value, x)
        elif t == STRUCT:
            self.struct(v)
        else:
            raise ValueError(f"Thrift type {t}")

    def struct(self, fields: list[Field]) -> None:
        last = 0
        for fid, t, v in fields:
            if t in (TRUE, FALSE):
                t = TRUE if v else FALSE
            delta = fid - last
            if 0 < delta <= 15:
                self.out.append(delta << 4 | t)
            else:
                self.out.append(t)
                self.zigzag(fid)
            if t not in (TRUE, FALSE):
                self.value(t, v)
            last = fid
        self.out.append(STOP)


def encoded(t: int, v: Any) -> bytes:
    """The compact bytes of value ``v`` of type ``t``."""
    w = _Writer()
    w.value(t, v)
    return bytes(w.out)


def _field(fields: list[Field], fid: int) -> Field | None:
    return next((f for f in fields if f[0] == fid), None)


def read_footer(path: str | os.PathLike) -> tuple[int, int, list[Field]]:
    """(file size, where the footer starts, the decoded FileMetaData) of a
    plain (unencrypted) Parquet file; only its ends are read."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < 12:
            raise ValueError(f"{path}: not a Parquet file")
        f.seek(size - 8)
        tail = f.read(8)
        length = struct.unpack("<I", tail[:4])[0]
        start = size - 8 - length
        f.seek(0)
        if tail[4:] != b"PAR1" or start < 4 or f.read(4) != b"PAR1":
            raise ValueError(f"{path}: not a plain Parquet file")
        f.seek(start)
        footer = f.read(length)
    return size, start, _Reader(memoryview(footer)).struct()


def _row_groups(meta: list[Field]) -> list[list[Field]]:
    return _field(meta, FILE_ROW_GROUPS)[2][1]


def _chunks(group: list[Field]) -> list[list[Field]]:
    return _field(group, GROUP_COLUMNS)[2][1]


def mergeable(metas: Sequence[list[Field]]) -> bool:
    """Whether files of these footers can be joined by copying their bytes:
    one schema and key-value metadata, no encryption, no column chunk in
    another file, and no page index (its page locations are absolute
    offsets in the data, which would have to be rewritten too)."""
    schema = encoded(LIST, _field(metas[0], FILE_SCHEMA)[2])
    key_values = _field(metas[0], FILE_KEY_VALUES)
    for meta in metas:
        if _field(meta, FILE_ENCRYPTION) or _field(meta, FILE_SIGNING_KEY):
            return False
        if encoded(LIST, _field(meta, FILE_SCHEMA)[2]) != schema or _field(meta, FILE_KEY_VALUES) != key_values:
            return False
        for group in _row_groups(meta):
            for chunk in _chunks(group):
                if any(_field(chunk, fid) for fid in (CHUNK_FILE_PATH, CHUNK_OFFSET_INDEX, CHUNK_COLUMN_INDEX,
                                                      CHUNK_CRYPTO, CHUNK_ENCRYPTED_META)):
                    return False
    return True


def _moved(group: list[Field], shift: int, ordinal: int) -> list[Field]:
    """Row group ``group`` with its absolute offsets moved by ``shift`` bytes,
    the ``ordinal``-th of the file. An offset of 0 is none (a ColumnChunk's
    ``file_offset``, which writers now set so), and stays 0 (helper-185)."""
    for f in group:
        if f[0] == GROUP_FILE_OFFSET and f[2] > 0:
            f[2] += shift
        elif f[0] == GROUP_ORDINAL:
            f[2] = ordinal
    for chunk in _chunks(group):
        for f in chunk:
            if f[0] == CHUNK_FILE_OFFSET and f[2] > 0:
                f[2] += shift
        meta = _field(chunk, CHUNK_META)
        for f in meta[2] if meta else ():
            if f[0] in (META_DATA_PAGE, META_INDEX_PAGE, META_DICTIONARY_PAGE, META_BLOOM_FILTER) and f[2] > 0:
                f[2] += shift
    return group


def _copy_range(src: BinaryIO, dst: BinaryIO, offset: int, length: int) -> None:
    """``length`` bytes of ``src`` from ``offset`` on, appended to ``dst``."""
    src.seek(offset)
    while length:
        chunk = src.read(min(length, 1 << 22))
        if not chunk:
            raise ValueError(f"{src.name}: shorter than its footer says")
        dst.write(chunk)
        length -= len(chunk)


def concatenate(paths: Sequence[str], out_path: str) -> bool:
    """Write the Parquet files ``paths`` as the one file ``out_path``, their
    row groups in order, copied as they are. False, and nothing written,
    where their footers do not allow it (:func:`mergeable`), or are not ones
    this reader takes."""
    try:
        parts = [read_footer(p) for p in paths]
        if not mergeable([meta for _, _, meta in parts]):
            return False
    except (ValueError, IndexError, struct.error):  # a footer this reader does not take: DuckDB's to write
        return False
    groups: list[list[Field]] = []
    rows = 0
    with open(out_path, "wb") as out:
        try:
            out.write(b"PAR1")
            pos = 4
            for path, (_, start, meta) in zip(paths, parts):
                with open(path, "rb") as part:
                    _copy_range(part, out, 4, start - 4)  # its data, between its magic and its footer
                for group in _row_groups(meta):
                    if _field(group, GROUP_ROWS)[2]:  # (an empty part's empty group: none in DuckDB's copy)
                        groups.append(_moved(group, pos - 4, len(groups)))
                        rows += _field(group, GROUP_ROWS)[2]
                pos += start - 4
            merged = [list(f) for f in parts[0][2]]
            _field(merged, FILE_ROWS)[2] = rows
            _field(merged, FILE_ROW_GROUPS)[2] = (STRUCT, groups)
            w = _Writer()
            w.struct(merged)
            out.write(w.out)
            out.write(struct.pack("<I", len(w.out)))
            out.write(b"PAR1")
        except BaseException:  # a half-written file is no output (a Ctrl-C too)
            out.close()
            os.unlink(out_path)
            raise
    return True
