"""Server profiles: every bad field refused with its message, and the argv a real llama-server runs."""

import html
import os
from pathlib import Path

import httpx
import numpy as np
import pytest
from django.core.exceptions import ValidationError
from gguf import GGUFWriter

from monitor.models import ServerProfile
from monitor.profiles.allowed_options import ALLOWED
from monitor.profiles.options import profile_argv, write_template
from monitor.profiles.selectors import find_profile
from monitor.profiles.validation import known_options, validate_profile
from monitor.web.forms import ServerProfileForm
from tests.support import stack
from tests.support.client import base_url, login, make_user

MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])
BINARY = os.environ["LLAMA_SERVER_BIN"]


def profile(**changes) -> ServerProfile:
    base = ServerProfile.objects.get(name="chat-8k")
    base.pk = None
    base.name = "candidate"
    base.is_default = False
    for key, value in changes.items():
        setattr(base, key, value)
    return base


def refusal(candidate: ServerProfile) -> dict:
    with pytest.raises(ValidationError) as refused:
        validate_profile(candidate, binary=BINARY)
    return refused.value.message_dict


def test_seeded_profiles_are_valid():
    names = set(ServerProfile.objects.values_list("name", flat=True))
    assert {"chat-8k", "long-32k"} <= names
    assert find_profile().name == "chat-8k"
    for item in ServerProfile.objects.filter(name__in=["chat-8k", "long-32k"]):
        validate_profile(item, binary=BINARY)


@pytest.fixture(scope="module")
def odd_files():
    (MODELS / "not-a-model.gguf").write_bytes(b"<html>oops</html>")
    tiny = MODELS / "tiny-draft.gguf"
    writer = GGUFWriter(str(tiny), "llama")
    writer.add_block_count(1)
    writer.add_token_list([f"t{i}" for i in range(5000)])
    writer.add_tensor("token_embd.weight", np.ones((5000, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    yield
    (MODELS / "not-a-model.gguf").unlink()
    tiny.unlink()


@pytest.mark.parametrize(
    "changes,field,message",
    [
        ({"ctx_size": 10}, "ctx_size", "between 256"),
        ({"cache_type_k": "q3_x"}, "cache_type_k", "Unknown cache type"),
        ({"gpu_layers": "lots"}, "gpu_layers", "a number, auto or all"),
        ({"model_file": "missing.gguf"}, "model_file", "not in the models directory"),
        ({"model_file": "../../etc/passwd"}, "model_file", "not a path"),
        ({"model_file": "not-a-model.gguf"}, "model_file", "not a GGUF file"),
        ({"draft_model_file": "tiny-draft.gguf"}, "draft_model_file", "vocabulary size (5000) does not match"),
        ({"n_cpu_moe": 4}, "n_cpu_moe", "not a mixture-of-experts"),
        ({"extra_args": "--port 9999"}, "extra_args", "--port is not allowed in a profile"),
        ({"extra_args": "--no-such-flag 1"}, "extra_args", "--no-such-flag is not allowed in a profile"),
        ({"extra_args": "; rm -rf /"}, "extra_args", "cannot contain"),
        ({"extra_args": "rm -rf /"}, "extra_args", "rm is not an option"),
        ({"extra_args": "--override-kv 'unclosed"}, "extra_args", "cannot be read"),
        ({"chat_template": "chatml"}, "chat_template_jinja", "not both"),
        ({"chat_template": "no-such-template", "chat_template_jinja": ""}, "chat_template", "no built-in template"),
        ({"ubatch_size": 4096, "batch_size": 2048}, "ubatch_size", "larger than the batch"),
    ],
)
def test_bad_fields_are_refused(odd_files, changes, field, message):
    errors = refusal(profile(**changes))
    assert field in errors and message in " ".join(errors[field]), errors


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("--override-kv a=int:1 b=int:2", "b=int:2 is not an option"),  # a stray value would break the preset INI
        ("--samplers top_k;temp", "cannot contain"),  # ';' starts an INI comment
        ("--alias '[x]'", "cannot contain"),
        ("--log-file /tmp/x.log", "--log-file is not allowed"),  # options that write files are refused
        ("--slot-save-path /tmp", "--slot-save-path is not allowed"),
    ],
)
def test_extra_args_that_would_break_the_presets_or_write_files_are_refused(extra, message):
    assert message in refusal(profile(extra_args=extra))["extra_args"][0]


def test_known_extra_args_pass():
    validate_profile(profile(extra_args="--cache-reuse 256 -rea off --no-warmup"), binary=BINARY)


def test_every_allowed_option_is_one_the_pinned_binary_lists():
    assert not set(ALLOWED) - known_options(BINARY)  # the reviewed list keeps step with llama-server


def test_a_binary_that_lists_no_options_means_extra_arguments_cannot_be_saved(tmp_path):
    silent = tmp_path / "llama-server"
    silent.write_text("#!/bin/sh\nexit 0\n")
    silent.chmod(0o755)
    errors = refusal_with(profile(extra_args="--top-nsigma 1"), str(silent))
    assert "cannot be asked for its options" in errors["extra_args"][0]
    validate_profile(profile(extra_args=""), binary=str(silent))  # no extra arguments: nothing to check


def refusal_with(candidate: ServerProfile, binary: str) -> dict:
    with pytest.raises(ValidationError) as refused:
        validate_profile(candidate, binary=binary)
    return refused.value.message_dict


def form_data(name: str, extra_args: str) -> dict:
    base = ServerProfile.objects.get(name="chat-8k")
    data = {field: getattr(base, field) for field in ServerProfileForm.Meta.fields}
    data.update(name=name, extra_args=extra_args, is_default=False, remote_api_key="")
    return {key: value for key, value in data.items() if value is not False and value is not None}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("""--mcp-servers-json '{"mcpServers":{"files":{"command":"touch"}}}'""",
         "llama-server option --mcp-servers-json is not allowed in a profile."),
        ("--log-prompts-dir /tmp/x", "llama-server option --log-prompts-dir is not allowed in a profile."),
        ("--lora ../../etc/passwd", "--lora takes files of the models folder (../../etc/passwd is not one)."),
    ],
)  # fmt: skip
def test_the_staff_form_refuses_dangerous_options_and_saves_nothing(web_server, extra, message):
    http = login(make_user(is_staff=True))
    http.get("/monitor/profiles/new/")
    data = {"csrfmiddlewaretoken": http.cookies["csrftoken"], **form_data("refused-extra", extra)}
    response = http.post("/monitor/profiles/new/", data=data)
    assert response.status_code == 200 and html.unescape(response.text).count(message) == 1, response.text[-3000:]
    assert not ServerProfile.objects.filter(name="refused-extra").exists()


def test_the_staff_form_saves_safe_options(web_server):
    http = login(make_user(is_staff=True))
    http.get("/monitor/profiles/new/")
    data = {"csrfmiddlewaretoken": http.cookies["csrftoken"], **form_data("safe-extra", "--top-nsigma 1 -lm mlock")}
    try:
        response = http.post("/monitor/profiles/new/", data=data)
        assert "Saved" in response.text and "--top-nsigma 1 -lm mlock" in response.text, response.text[-3000:]
        assert ServerProfile.objects.get(name="safe-extra").extra_args == "--top-nsigma 1 -lm mlock"
    finally:
        ServerProfile.objects.filter(name="safe-extra").delete()


def test_profile_argv_runs_llama_server_and_context_change_shows_in_props(run_dir):
    candidate = profile(ctx_size=2048, parallel=1)
    candidate.save()
    try:
        for ctx in (2048, 3072):
            candidate.ctx_size = ctx
            validate_profile(candidate, binary=BINARY)
            candidate.save()
            write_template(candidate)
            port = stack.free_port()
            server = stack.PlainLlamaServer(
                run_dir,
                profile_argv(candidate, BINARY, host="127.0.0.1", port=port),
                dict(os.environ),
                f"http://127.0.0.1:{port}",
            )
            server.start()
            try:
                props = httpx.get(server.url + "/props").json()
                assert props["default_generation_settings"]["n_ctx"] == ctx
                prompt = httpx.post(
                    server.url + "/apply-template", json={"messages": [{"role": "user", "content": "hi"}]}
                ).json()["prompt"]
                assert prompt.startswith("<start_of_turn>user\nhi")
            finally:
                server.stop()
    finally:
        candidate.delete()


def test_planner_recommendation_applies_to_a_profile(web_server):
    target = profile(name="apply-target")
    target.save()
    admin = make_user(is_staff=True)
    http = login(admin)
    response = http.post(
        "/monitor/models/planner/apply/",
        data={
            "csrfmiddlewaretoken": http.cookies["csrftoken"], "profile": target.pk, "gpu_layers": 19, "ctx_size": 16384,
            "parallel": 1, "cache_type_k": "q8_0", "cache_type_v": "q8_0", "cpu_moe_layers": 0,
        },
    )  # fmt: skip
    assert "now uses the recommended settings" in response.text
    target.refresh_from_db()
    assert (target.gpu_layers, target.ctx_size, target.cache_type_k) == ("19", 16384, "q8_0")
    # A recommendation the profile cannot take is refused and nothing changes.
    response = http.post(
        "/monitor/models/planner/apply/",
        data={
            "csrfmiddlewaretoken": http.cookies["csrftoken"], "profile": target.pk, "gpu_layers": 19, "ctx_size": 16384,
            "parallel": 1, "cache_type_k": "q9_9", "cache_type_v": "q8_0", "cpu_moe_layers": 0,
        },
    )  # fmt: skip
    assert "Unknown cache type" in response.text
    target.refresh_from_db()
    assert target.cache_type_k == "q8_0"
    # After applying, the page goes back to the planner, never to an address it was handed.
    for target_url, expected in (("/monitor/models/planner/?model=x", "/monitor/models/planner/?model=x"),
                                 ("https://elsewhere.example/", "/monitor/models/planner/"),
                                 ("//elsewhere.example/", "/monitor/models/planner/")):  # fmt: skip
        response = http.post(
            "/monitor/models/planner/apply/",
            data={
                "csrfmiddlewaretoken": http.cookies["csrftoken"], "profile": target.pk, "gpu_layers": 19,
                "ctx_size": 16384, "parallel": 1, "cache_type_k": "q8_0", "cache_type_v": "q8_0",
                "cpu_moe_layers": 0, "next": target_url,
            },
            follow_redirects=False,
        )  # fmt: skip
        assert response.status_code == 302 and response.headers["location"] == expected
    assert base_url()
