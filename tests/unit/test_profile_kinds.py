"""A profile's kind (chat, embeddings, reranking): its llama-server options, what it may not have, its own
instance limit, and the planner's embeddings mode, without services."""

import pytest
from django.conf import settings

from monitor.catalog.planner import PlanRequest, plan, plan_flags
from monitor.catalog.registry import read_model_info
from monitor.models import ServerProfile
from monitor.profiles.allowed_options import ALLOWED
from monitor.profiles.loading import _is_chat
from monitor.profiles.options import options_argv, profile_options
from monitor.profiles.validation import extra_args_problem, kind_problems
from tests.support.synthetic_gguf import Shape, write_model, write_reranker

Kind, Pooling = ServerProfile.Kind, ServerProfile.Pooling
CHAT_ONLY = ("--temp", "--top-p", "--reasoning", "--reasoning-budget", "--repeat-penalty", "--chat-template-file")


def profile(**fields) -> ServerProfile:
    return ServerProfile(**{"name": "p", "model_file": "m.gguf", "chat_template_jinja": "{{ messages }}", **fields})


def test_a_chat_profile_s_options_are_those_of_before_kinds():
    argv = options_argv(profile_options(profile()))
    assert "--embeddings" not in argv and "--reranking" not in argv and "--pooling" not in argv
    assert all(option in argv for option in CHAT_ONLY)
    assert argv.index("--parallel") < argv.index("--reasoning") < argv.index("--chat-template-file")


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_an_embeddings_profile_runs_with_embeddings_and_its_pooling_and_nothing_of_chat(pooling):
    argv = options_argv(profile_options(profile(kind=Kind.EMBEDDING, pooling=pooling, draft_model_file="d.gguf")))
    assert argv[argv.index("--embeddings") + 1 : argv.index("--embeddings") + 3] == ["--pooling", pooling]
    assert not any(option in argv for option in CHAT_ONLY) and "--model-draft" not in argv
    assert "--reranking" not in argv and argv[argv.index("--parallel") + 1] == "2"


def test_a_reranking_profile_runs_with_reranking_its_pooling_set_by_llama_server():
    argv = options_argv(profile_options(profile(kind=Kind.RERANK, pooling=Pooling.MEAN, mmproj_file="p.gguf")))
    assert "--reranking" in argv
    assert "--pooling" not in argv and "--embeddings" not in argv and "--mmproj" not in argv
    assert not any(option in argv for option in CHAT_ONLY)


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"draft_model_file": "d.gguf"}, "draft_model_file", "for chat profiles only"),
        ({"mmproj_file": "p.gguf"}, "mmproj_file", "for chat profiles only"),
        ({"chat_template": "chatml"}, "chat_template", "for chat profiles only"),
        ({"reasoning": "on"}, "reasoning", "for chat profiles only"),
        ({"scan_reader": "model"}, "scan_reader", "for chat profiles only"),
        ({"is_default": True}, "is_default", "must be a chat profile"),
        ({"pooling": "none"}, "pooling", "one vector per text"),
        ({"pooling": "rank"}, "pooling", "choose the kind reranking"),
        ({"pooling": "max"}, "pooling", "mean, CLS or last token"),
    ],
)
def test_what_an_embeddings_profile_cannot_have_is_refused_by_field(changes, field, message):
    candidate = profile(kind=Kind.EMBEDDING, **changes)
    candidate.chat_template_jinja = ""
    problems = kind_problems(candidate)
    assert set(problems) == {field} and message in problems[field], problems


def test_a_reranking_profile_ignores_its_pooling_and_a_chat_profile_has_no_kind_problems():
    assert kind_problems(profile(kind=Kind.RERANK, pooling="none", chat_template_jinja="")) == {}
    assert "chat_template_jinja" in kind_problems(profile(kind=Kind.RERANK))
    assert "kind" in kind_problems(profile(kind="vision"))


def test_extra_arguments_cannot_set_the_kind_nor_chat_only_options_of_an_embedder():
    known = frozenset(ALLOWED)
    for extra in ("--embeddings", "--reranking", "--pooling cls", "--rerank", "--embedding"):
        assert "comes from the profile's kind" in extra_args_problem(extra, known), extra
        assert "comes from the profile's kind" in extra_args_problem(extra, known, chat=False), extra
    for extra in (
        "--spec-type ngram-mod",
        "-rea on",
        "--reasoning-budget 10",
        "--jinja",
        "-ngld 9",
        "--image-max-tokens 9",
    ):
        assert extra_args_problem(extra, known) is None, extra
        assert "for chat profiles only" in extra_args_problem(extra, known, chat=False), extra
    assert extra_args_problem("--ubatch-size 1024 --embd-normalize 2 --no-repack", known, chat=False) is None


def test_embedders_count_against_their_own_instance_limit():
    embedders = frozenset({"embed-2k"})
    assert not _is_chat("embed-2k@3", embedders)
    assert _is_chat("chat-8k@1", embedders) and _is_chat("gone@2", embedders) and _is_chat("not-an-id", embedders)


def test_the_router_has_room_for_both_limits_and_a_spare():
    from monitor.router.supervisor import router_argv

    argv = router_argv("llama-server")
    assert argv[argv.index("--models-max") + 1] == str(settings.LLAMA_MODELS_MAX + settings.LLAMA_EMBED_MODELS_MAX + 1)


def test_the_planner_plans_an_embedder_without_logits_nor_prompt_cache(tmp_path):
    model = read_model_info(write_model(tmp_path / "dense.gguf", Shape(arch="qwen3", n_layer=2), sparse=True))
    chat = plan(model, PlanRequest(ctx_size=4096, parallel=2, ubatch=2048))
    embedder = plan(model, PlanRequest(ctx_size=4096, parallel=2, ubatch=2048, embeddings=True))
    assert embedder.prompt_cache == 0 and chat.prompt_cache > 0
    assert embedder.output_cpu == model.n_embd * 4 * 2048  # every token of a micro-batch, no vocabulary row
    assert embedder.kv_total == chat.kv_total and embedder.weights_cpu == chat.weights_cpu
    assert "--embeddings" in plan_flags(embedder.request) and "--embeddings" not in plan_flags(chat.request)


def test_the_default_embeddings_profile_is_seeded_placed_here_and_valid_by_kind():
    seeded = ServerProfile.objects.get(name="embed-2k")
    assert (seeded.kind, seeded.pooling, seeded.model_file) == (Kind.EMBEDDING, "mean", settings.DEFAULT_MODEL_FILE)
    assert seeded.placements.filter(node__is_local=True).exists() and not seeded.load_on_startup
    assert seeded.ubatch_size == seeded.batch_size >= seeded.ctx_size // seeded.parallel  # a slot's text fits
    assert kind_problems(seeded) == {} and not seeded.is_default
    assert ServerProfile.objects.filter(is_default=True).get().is_chat


def test_the_synthetic_reranker_carries_a_classification_head_and_rank_pooling(tmp_path):
    from gguf import GGUFReader

    reader = GGUFReader(write_reranker(tmp_path / "reranker.gguf"))
    assert {"cls.output.weight": [128, 2]}.items() <= {t.name: list(t.shape) for t in reader.tensors}.items()
    pooling = reader.fields["qwen3.pooling_type"]
    assert int(pooling.parts[pooling.data[0]][0]) == 4  # LLAMA_POOLING_TYPE_RANK
    assert read_model_info(tmp_path / "reranker.gguf").architecture == "qwen3"
