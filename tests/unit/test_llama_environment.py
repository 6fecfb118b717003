"""On a CPU with AMX, llama-server's weight repacking (ggml's AMX kernels) crashed at the first matrix
multiply: every llama-server the product, the tests and the benches start gets LLAMA_ARG_REPACK=false
there (monitor.llama.binary.without_amx_repack), and nowhere else."""

from __future__ import annotations

import os

from django.conf import settings

from monitor.llama import binary

AMX_FLAGS = "flags\t\t: fpu vme avx2 avx512f avx512_vnni amx_bf16 avx512_fp16 amx_tile amx_int8\n"
PLAIN_FLAGS = "flags\t\t: fpu vme avx2 avx512f avx512_vnni\n"


def test_amx_is_read_from_the_cpu_flags(tmp_path):
    (tmp_path / "amx").write_text("processor\t: 0\n" + AMX_FLAGS)
    (tmp_path / "plain").write_text("processor\t: 0\n" + PLAIN_FLAGS)
    assert binary.cpu_has_amx(tmp_path / "amx")
    assert not binary.cpu_has_amx(tmp_path / "plain")
    assert not binary.cpu_has_amx(tmp_path / "missing")


def test_repacking_is_off_only_on_an_amx_host_and_an_explicit_choice_wins(monkeypatch):
    monkeypatch.setattr(binary, "cpu_has_amx", lambda: True)
    env: dict[str, str] = {}
    binary.without_amx_repack(env)
    assert env == {"LLAMA_ARG_REPACK": "false"}
    env = {"LLAMA_ARG_REPACK": "true"}
    binary.without_amx_repack(env)
    assert env == {"LLAMA_ARG_REPACK": "true"}
    monkeypatch.setattr(binary, "cpu_has_amx", lambda: False)
    env = {}
    binary.without_amx_repack(env)
    assert env == {}


def test_the_router_gets_it_with_its_key(monkeypatch):
    monkeypatch.setattr(binary, "cpu_has_amx", lambda: True)
    monkeypatch.delenv("LLAMA_ARG_REPACK", raising=False)
    monkeypatch.setattr(settings, "LLAMA_API_KEY", "k")
    env = binary.llama_environment()
    assert env["LLAMA_ARG_REPACK"] == "false" and env["LLAMA_API_KEY"] == "k"
    assert "LLAMA_ARG_REPACK" not in os.environ  # the caller's own environment is left alone
