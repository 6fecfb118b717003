"""A download's blocks: hashed and written by two threads at once through reused buffers."""

from __future__ import annotations

import hashlib
import os

from monitor.catalog.blocks import BUFFERS, BlockPipeline


def _feed(pipeline: BlockPipeline, pieces: list[bytes]) -> None:
    for piece in pieces:
        buffer = pipeline.free.get(timeout=5)  # a reader blocked for good would fail here
        buffer[: len(piece)] = piece
        pipeline.put(buffer, len(piece))
    pipeline.close()


def test_the_file_and_its_hash_are_the_bytes_read_in_order(tmp_path):
    pieces = [os.urandom(size) for size in (5, 1 << 20, 17, 3 << 20)] * 3  # more reads than buffers
    digest = hashlib.sha256(b"earlier attempt")
    path = tmp_path / "model.part"
    path.write_bytes(b"earlier attempt")
    pipeline = BlockPipeline(path, "ab", digest)
    _feed(pipeline, pieces)
    assert not pipeline.failure
    assert path.read_bytes() == b"earlier attempt" + b"".join(pieces)
    assert digest.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
    assert pipeline.free.qsize() == BUFFERS  # every buffer came back


def test_a_write_failure_is_kept_and_the_reader_never_blocks(tmp_path):
    pipeline = BlockPipeline(tmp_path / "missing-folder" / "model.part", "wb", hashlib.sha256())
    _feed(pipeline, [b"x" * 1000] * (3 * BUFFERS))
    assert isinstance(pipeline.failure[0], OSError)
