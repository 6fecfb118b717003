"""A fast reader of a GGUF file's header: metadata and the tensor table.

``gguf.GGUFReader`` builds a Python object for every element of every array, which
takes tens of seconds for a 262k-token vocabulary; a registry scan needs only the
scalars, the array lengths and the tensor table. Large arrays are skipped, not
read; the weights are never touched. Type constants come from the ``gguf`` package.
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
SMALL_ARRAY = 4096
_U64 = struct.Struct("<Q")  # arrays up to this many numbers are read (per-layer patterns and the like)


class HeaderError(ValueError):
    pass


@dataclass
class TensorEntry:
    name: str
    shape: tuple[int, ...]
    type_name: str
    n_elements: int
    n_bytes: int


@dataclass
class ArrayInfo:
    length: int
    values: list | None  # None when the array is large or holds strings


@dataclass
class Header:
    version: int
    metadata: dict[str, object]
    tensors: list[TensorEntry]
    data_end: int = 0  # where the last tensor's data ends; beyond the file size means truncated
    file_size: int = 0


class _Cursor:
    def __init__(self, data):
        self.data = data
        self.offset = 0

    def take(self, fmt: str):
        try:
            values = struct.unpack_from("<" + fmt, self.data, self.offset)
        except struct.error as error:
            raise HeaderError("the header ends early") from error
        self.offset += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string(self) -> str:
        length = self.take("Q")
        if self.offset + length > len(self.data):
            raise HeaderError("a string runs past the end of the file")
        value = bytes(self.data[self.offset : self.offset + length]).decode("utf-8", errors="replace")
        self.offset += length
        return value

    def skip_strings(self, count: int) -> None:
        # A tight loop: a vocabulary holds a few hundred thousand strings.
        unpack, data, offset = _U64.unpack_from, self.data, self.offset
        try:
            for _ in range(count):
                offset += 8 + unpack(data, offset)[0]
        except struct.error as error:
            raise HeaderError("the header ends early") from error
        if offset > len(data):
            raise HeaderError("a string runs past the end of the file")
        self.offset = offset

    def value(self, kind: int):
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            item_kind, length = self.take("I"), self.take("Q")
            if item_kind == STRING:
                self.skip_strings(length)
                return ArrayInfo(length, None)
            if item_kind not in _SCALARS:
                raise HeaderError(f"unsupported array item type {item_kind}")
            values = None
            if length <= SMALL_ARRAY:
                values = list(struct.unpack_from(f"<{length}{_SCALARS[item_kind]}", self.data, self.offset))
            self.offset += struct.calcsize(_SCALARS[item_kind]) * length
            return ArrayInfo(length, values)
        raise HeaderError(f"unknown value type {kind}")


def read_header(path: Path) -> Header:
    with Path(path).open("rb") as handle:
        try:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as error:  # empty file
            raise HeaderError("the file is empty") from error
    with data:
        cursor = _Cursor(data)
        if cursor.take("4s") != b"GGUF":
            raise HeaderError("not a GGUF file")
        version = cursor.take("I")
        if version not in (2, 3):
            raise HeaderError(f"unsupported GGUF version {version}")
        n_tensors, n_kv = cursor.take("Q"), cursor.take("Q")
        if n_tensors > 1_000_000 or n_kv > 1_000_000:
            raise HeaderError("implausible header counts")
        metadata = {}
        for _ in range(n_kv):
            key = cursor.string()
            metadata[key] = cursor.value(cursor.take("I"))
        tensors = []
        data_extent = 0
        for _ in range(n_tensors):
            name = cursor.string()
            n_dims = cursor.take("I")
            shape = tuple(cursor.take("Q") for _ in range(n_dims))
            type_id = cursor.take("I")
            offset = cursor.take("Q")  # in the data section
            try:
                kind = GGMLQuantizationType(type_id)
            except ValueError as error:
                raise HeaderError(f"tensor {name} has unknown type {type_id}") from error
            block, type_size = GGML_QUANT_SIZES[kind]
            n_elements = math.prod(shape)
            tensors.append(TensorEntry(name, shape, kind.name, n_elements, n_elements // block * type_size))
            data_extent = max(data_extent, offset + tensors[-1].n_bytes)
        alignment = metadata.get("general.alignment", 32)
        alignment = alignment if isinstance(alignment, int) and alignment > 0 else 32
        data_start = -(-cursor.offset // alignment) * alignment
        return Header(version, metadata, tensors, data_start + data_extent, len(data))
