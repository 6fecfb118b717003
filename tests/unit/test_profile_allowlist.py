"""The reviewed allowlist of llama-server options a profile may set, and how --help is read, without services."""

from pathlib import Path

import pytest
from django.conf import settings

from monitor.models import ServerProfile
from monitor.profiles.allowed_options import ALLOWED, value_problem
from monitor.profiles.options import options_argv, profile_options
from monitor.profiles.validation import extra_args_problem, known_options

HELP = """----- common params -----
-c,    --ctx-size N                     size of the prompt context
-fa,   --flash-attn [on|off|auto]       set Flash Attention use
--spec-draft-model, -md, --model-draft FNAME
                                        draft model for speculative decoding
--mcp-servers-json JSON                 experimental: inline JSON with MCP server definitions
-lm,   --load-mode MODE                 model loading mode (default: auto)
"""

MUST_REFUSE = (
    "--mcp-servers-json --mcp-servers-config --agent -ag --no-agent --tools-runtime --tools --log-prompts-dir "
    "--spec-draft-hf -hfd --ui-mcp-proxy --webui-mcp-proxy --log-file --slot-save-path -hf -hfr --hf-repo -hff "
    "--hf-file -hft --hf-token -hfv -mu --model-url -mmu --mmproj-url -dr --docker-repo --host --port --api-key "
    "--api-key-file --ssl-key-file --ssl-cert-file --path --webui --ui --webui-config --webui-config-file "
    "--media-path --models-dir --models-preset --models-max --models-autoload -m --model --video-ffmpeg-dir "
    "--props --alias -a --rpc -lcs --lookup-cache-static -lcd --lookup-cache-dynamic --grammar-file "
    "--json-schema-file -v --verbose --log-verbose --spec-default --gpt-oss-20b-default --cors-origins"
).split()


def test_help_lines_give_every_spelling_of_each_option(tmp_path):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n" + HELP + "EOF\n")
    fake.chmod(0o755)
    names = known_options(str(fake))
    assert {"-c", "--ctx-size", "-fa", "--flash-attn", "--spec-draft-model", "-md", "--model-draft"} <= names
    assert {"-lm", "--load-mode", "--mcp-servers-json"} <= names
    assert "N" not in names and "--auto" not in names


@pytest.mark.parametrize("option", MUST_REFUSE)
def test_dangerous_options_are_not_on_the_allowlist(option):
    assert option not in ALLOWED
    assert "not allowed in a profile" in extra_args_problem(f"{option} x", frozenset(MUST_REFUSE))


def test_values_are_checked_by_kind():
    assert value_problem("--top-nsigma", "1") is None
    assert value_problem("--ctx-size", "lots")
    assert value_problem("--threads", "99999")
    assert value_problem("--flash-attn", None) is None and value_problem("--flash-attn", "on") is None
    assert value_problem("--flash-attn", "sometimes")
    assert value_problem("--swa-full", None) is None and value_problem("--swa-full", "yes")
    assert value_problem("--cache-type-k", "q8_0") is None and value_problem("--cache-type-k", "q3_x")
    assert value_problem("--load-mode", "mlock") is None and value_problem("--load-mode", "/dev/sda")
    assert value_problem("-ot", r"blk\.1\d\.ffn_.*_exps\.=CPU") is None
    assert value_problem("-ot", "x=CPU,../../y") and value_problem("-ot", "x=CPU y")
    assert value_problem("--spec-type", "ngram-mod,draft-simple") is None and value_problem("--spec-type", "rm")
    assert value_problem("--chat-template-kwargs", '{"enable_thinking":false}') is None


@pytest.fixture
def models_dir(tmp_path):
    before = settings.MODELS_DIR, settings.VAR_DIR
    settings.MODELS_DIR = tmp_path / "models"
    settings.VAR_DIR = tmp_path / "var"
    settings.MODELS_DIR.mkdir()
    (settings.VAR_DIR / "chat_templates").mkdir(parents=True)
    yield settings.MODELS_DIR
    settings.MODELS_DIR, settings.VAR_DIR = before


def test_files_must_resolve_inside_the_models_folder(models_dir: Path, tmp_path: Path):
    (models_dir / "adapter.gguf").write_bytes(b"GGUF")
    (tmp_path / "secret").write_text("x")
    (models_dir / "escape.gguf").symlink_to(tmp_path / "secret")
    known = frozenset(ALLOWED)
    assert extra_args_problem("--lora adapter.gguf", known) is None
    assert extra_args_problem("--lora-scaled adapter.gguf:0.5", known) is None
    assert extra_args_problem("--control-vector adapter.gguf", known) is None
    for value in ("../../etc/passwd", "/etc/passwd", "escape.gguf", "missing.gguf", "adapter.gguf,../secret"):
        problem = extra_args_problem(f"--lora {value}", known)
        assert problem and "models folder" in problem, value
    assert "models folder" in extra_args_problem("--model-draft escape.gguf", known)
    assert "scale" in extra_args_problem("--lora-scaled adapter.gguf:big", known)


def test_chat_template_files_are_the_apps_own_or_in_the_models_folder(models_dir: Path, tmp_path: Path):
    (settings.VAR_DIR / "chat_templates" / "template-abc.jinja").write_text("{{ x }}")
    (models_dir / "mine.jinja").write_text("{{ x }}")
    (tmp_path / "outside.jinja").write_text("{{ x }}")
    known = frozenset(ALLOWED)
    assert extra_args_problem("--chat-template-file template-abc.jinja", known) is None
    assert extra_args_problem("--chat-template-file mine.jinja", known) is None
    for value in ("../outside.jinja", str(tmp_path / "outside.jinja"), "../../../etc/passwd"):
        assert "template file" in extra_args_problem(f"--chat-template-file {value}", known), value


def test_unknown_to_the_binary_or_unlisted_options_are_refused():
    assert "has no option --top-nsigma" in extra_args_problem("--top-nsigma 1", frozenset({"--mlock"}))
    assert "--no-such-flag is not allowed" in extra_args_problem("--no-such-flag", frozenset(ALLOWED))


def test_files_in_extra_arguments_reach_llama_server_as_paths(models_dir: Path):
    (models_dir / "adapter.gguf").write_bytes(b"GGUF")
    (settings.VAR_DIR / "chat_templates" / "template-abc.jinja").write_text("{{ x }}")
    extra = "--lora-scaled adapter.gguf:0.5 --chat-template-file template-abc.jinja --top-nsigma 1"
    argv = options_argv(profile_options(ServerProfile(model_file="m.gguf", extra_args=extra)))
    assert argv[-6:] == [
        "--lora-scaled", f"{models_dir.resolve() / 'adapter.gguf'}:0.5",
        "--chat-template-file", str((settings.VAR_DIR / "chat_templates" / "template-abc.jinja").resolve()),
        "--top-nsigma", "1",
    ]  # fmt: skip
