"""Our header reader against files written, and read back, by the gguf package."""

import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter

from monitor.catalog.gguf_header import ArrayInfo, HeaderError, read_header
from monitor.catalog.registry import NotGGUF, read_model_info


@pytest.fixture
def small_model(tmp_path):
    path = tmp_path / "tiny.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_embedding_length(8)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_context_length(128)
    writer.add_token_list([f"t{i}" for i in range(5000)])
    writer.add_array("llama.attention.sliding_window_pattern", [True, False])
    writer.add_uint32("llama.attention.sliding_window", 64)
    writer.add_chat_template("{{ messages }}")
    writer.add_tensor("token_embd.weight", np.ones((5000, 8), dtype=np.float32))
    for il in range(2):
        writer.add_tensor(f"blk.{il}.attn_q.weight", np.ones((8, 8), dtype=np.float16))
    writer.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_header_matches_the_gguf_package(small_model):
    ours = read_header(small_model)
    theirs = GGUFReader(small_model)
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    assert [t.n_bytes for t in ours.tensors] == [int(t.n_bytes) for t in theirs.tensors]
    assert ours.metadata["llama.block_count"] == 2
    assert ours.metadata["tokenizer.ggml.tokens"] == ArrayInfo(5000, None)
    assert ours.metadata["llama.attention.sliding_window_pattern"].values == [True, False]


def test_model_info_from_the_header(small_model):
    info = read_model_info(small_model)
    assert (info.architecture, info.n_layer, info.n_head, info.n_head_kv, info.head_dim_k) == ("llama", 2, 2, 1, 4)
    assert info.vocab_size == 5000 and info.has_chat_template and info.tied_output
    assert info.swa_layers == [True, False] and info.sliding_window == 64
    assert info.input_bytes == 5000 * 8 * 4 and info.layer_bytes == [128, 128]


def test_truncated_and_foreign_files_are_refused(small_model, tmp_path):
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(small_model.read_bytes()[:2000])
    with pytest.raises(HeaderError):
        read_header(truncated)
    with pytest.raises(NotGGUF, match="cannot be read"):
        read_model_info(truncated)
    html = tmp_path / "page.gguf"
    html.write_bytes(b"<!DOCTYPE html><html>Not found</html>")
    with pytest.raises(NotGGUF, match="not a GGUF file"):
        read_model_info(html)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(NotGGUF):
        read_model_info(empty)
