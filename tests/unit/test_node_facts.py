"""What a node says about itself (its models' SHA256 cached by path, size and time), what it keeps of
its join (var/node.json, 0600), and the checks at the border of its calls (hostile facts refused)."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest
from django.core.exceptions import ValidationError

from monitor.nodes import facts, membership
from monitor.web.node_forms import clean_call


def test_model_hashes_are_computed_once_and_again_only_for_a_changed_file(tmp_path, monkeypatch):
    models, var = tmp_path / "models", tmp_path / "var"
    (models / "sub").mkdir(parents=True)
    (models / "a.gguf").write_bytes(b"first")
    (models / "sub" / "b.gguf").write_bytes(b"second")
    (models / "notes.txt").write_text("not a model")
    hashed = []
    real = facts.sha256_of
    monkeypatch.setattr(facts, "sha256_of", lambda path: hashed.append(path.name) or real(path))

    first = facts.model_files(models, var / facts.HASH_CACHE)
    assert first == [
        {"name": "a.gguf", "size": 5, "sha256": hashlib.sha256(b"first").hexdigest()},
        {"name": "sub/b.gguf", "size": 6, "sha256": hashlib.sha256(b"second").hexdigest()},
    ]
    assert sorted(hashed) == ["a.gguf", "b.gguf"]
    assert stat.S_IMODE((var / facts.HASH_CACHE).stat().st_mode) == 0o600

    hashed.clear()
    assert facts.model_files(models, var / facts.HASH_CACHE) == first
    assert hashed == []  # nothing changed: nothing read again

    (models / "a.gguf").write_bytes(b"FIRST")  # same size, new content and time
    os.utime(models / "a.gguf", ns=(1, 1))
    again = facts.model_files(models, var / facts.HASH_CACHE)
    assert hashed == ["a.gguf"]
    assert again[0]["sha256"] == hashlib.sha256(b"FIRST").hexdigest()


def test_facts_without_a_gpu_say_why(tmp_path):
    found = facts.gather(
        tmp_path / "none", "/nonexistent/llama-server", tmp_path, ([], "NVML Shared Library Not Found")
    )
    assert found["gpus"] == [] and found["gpu_note"] == "NVML Shared Library Not Found"
    assert found["ram_bytes"] > 0 and found["cpu_cores"] >= 1 and found["models"] == []
    assert found["llama_server"].startswith("unknown")
    assert "none (NVML Shared Library Not Found)" in facts.summary(found)
    clean_call({"name": "box-b", "url": "http://10.0.0.2:8081", "facts": found})  # what it sends passes its check


def test_what_a_node_keeps_is_private_and_its_urls_are_quoted(tmp_path):
    saved = membership.Saved(
        main="http://10.0.0.1:8000", name="box-b", credential="qwn-node-x", llama_api_key="sk-node-y",
        listen="http://10.0.0.2:8081", url="http://10.0.0.2:8081",
        redis={"host": "10.0.0.1", "port": 6390, "db": 0, "username": "qwenweb-node-box-b", "password": "p/w@:x"},
        database={"engine": "postgresql", "host": "10.0.0.1", "port": 5432, "name": "qwenweb", "user": "u", "password": "a b"},
    )  # fmt: skip
    membership.save(tmp_path, saved)
    assert stat.S_IMODE(membership.path_of(tmp_path).stat().st_mode) == 0o600
    assert membership.load(tmp_path) == saved
    assert saved.redis_url() == "redis://qwenweb-node-box-b:p%2Fw%40%3Ax@10.0.0.1:6390/0"
    assert saved.database_url() == "postgres://u:a%20b@10.0.0.1:5432/qwenweb"
    saved.update_addresses({"redis": {"host": "10.0.0.9", "port": 6391}, "database": {"port": 5433}})
    assert saved.redis_url().endswith("@10.0.0.9:6391/0") and saved.redis["password"] == "p/w@:x"
    assert saved.database_url().endswith("@10.0.0.1:5433/qwenweb")
    assert membership.load(tmp_path / "elsewhere") is None


GOOD = {"gpus": [], "gpu_note": "", "ram_bytes": 1, "cpu_cores": 2, "llama_server": "b1", "models": []}


@pytest.mark.parametrize(
    ("payload", "wrong"),
    [
        ({"name": "Box_B", "url": "http://h:1", "facts": GOOD}, "name"),
        ({"name": "b" * 49, "url": "http://h:1", "facts": GOOD}, "name"),
        ({"name": "box", "url": "file:///etc/passwd", "facts": GOOD}, "url"),
        ({"name": "box", "url": "http://user:pw@h:1", "facts": GOOD}, "url"),
        ({"name": "box", "url": "http://h:1/v1?x=1", "facts": GOOD}, "url"),
        ({"name": "box", "url": "http://h:port", "facts": GOOD}, "url"),
        ({"name": "box", "url": "http://h:1", "facts": "lots"}, "facts"),
        ({"name": "box", "url": "http://h:1", "facts": {**GOOD, "cpu_cores": 0}}, "cpu_cores"),
        ({"name": "box", "url": "http://h:1", "facts": {**GOOD, "gpus": [{"index": 0, "name": "x" * 101}]}}, "gpus"),
        ({"name": "box", "url": "http://h:1", "facts": {**GOOD, "gpus": [{}] * 65}}, "gpus"),
        (
            {
                "name": "box",
                "url": "http://h:1",
                "facts": {**GOOD, "models": [{"name": "../x", "size": 1, "sha256": "0" * 64}]},
            },
            "models",
        ),
        (
            {
                "name": "box",
                "url": "http://h:1",
                "facts": {**GOOD, "models": [{"name": "x", "size": 1, "sha256": "z"}]},
            },
            "models",
        ),
        ([1, 2], "JSON object"),
    ],
)
def test_a_nodes_call_is_checked_field_by_field(payload, wrong):
    with pytest.raises(ValidationError) as refused:
        clean_call(payload)
    assert wrong in " ".join(refused.value.messages)


@pytest.mark.parametrize(
    "url", ["http://gpu-box:8081", "http://gpu-box.local:8081/", "https://10.0.0.2", "http://[fe80::1]:80"]
)
def test_a_router_address_may_be_a_lan_name_or_address(url):
    fields, _facts = clean_call({"name": "box", "url": url, "facts": GOOD})
    assert fields["url"] == url.rstrip("/")


def test_a_join_needs_its_token_and_a_check_needs_no_facts():
    with pytest.raises(ValidationError, match="token"):
        clean_call({"name": "box", "url": "http://h:1", "facts": GOOD}, token=True)
    fields, found = clean_call({"name": "box"}, facts=False)
    assert fields["name"] == "box" and found == {}
