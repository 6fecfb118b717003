"""A profile's kind (chat, embeddings, reranking) and pooling; an embeddings profile of the default model.

The default model (Gemma 3 270M) pooled by its mean is a working embedder, so a fresh install serves
``/v1/embeddings`` with no download. It is placed on this box's node and loads at its first request
(not at start: the chat's instance is never held up by it; its limit is its own, QWENWEB_EMBED_MODELS_MAX).
"""

from django.conf import settings
from django.db import migrations, models

EMBEDDINGS_PROFILE = "embed-2k"


def seed_embeddings_profile(apps, schema_editor):
    ServerProfile = apps.get_model("monitor", "ServerProfile")
    Node = apps.get_model("monitor", "Node")
    Placement = apps.get_model("monitor", "Placement")
    if (
        ServerProfile.objects.filter(kind="embedding").exists()
        or ServerProfile.objects.filter(name=EMBEDDINGS_PROFILE).exists()
    ):
        return
    profile = ServerProfile.objects.create(
        name=EMBEDDINGS_PROFILE,
        description="Embeddings of the default model (mean pooling), up to 2K tokens a text, 2 slots",
        kind="embedding",
        pooling="mean",
        model_file=settings.DEFAULT_MODEL_FILE,
        # Two slots of 2048 tokens; a mean-pooled text must fit one micro-batch, so the batch is a slot's size.
        ctx_size=4096,
        parallel=2,
        batch_size=2048,
        ubatch_size=2048,
        cache_type_k="f16",
        cache_type_v="f16",
    )
    node, _created = Node.objects.get_or_create(is_local=True, defaults={"name": settings.NODE_NAME})
    Placement.objects.get_or_create(profile=profile, node=node)


class Migration(migrations.Migration):
    dependencies = [
        ("monitor", "0012_metric_minute_node"),
    ]

    operations = [
        migrations.AddField(
            model_name="serverprofile",
            name="kind",
            field=models.CharField(
                choices=[("chat", "chat"), ("embedding", "embeddings"), ("rerank", "reranking")],
                default="chat",
                help_text="Embeddings and reranking profiles serve /v1/embeddings and /v1/rerank, not chat.",
                max_length=16,
                verbose_name="kind",
            ),
        ),
        migrations.AddField(
            model_name="serverprofile",
            name="pooling",
            field=models.CharField(
                choices=[
                    ("mean", "mean of the tokens"),
                    ("cls", "first token (CLS)"),
                    ("last", "last token"),
                    ("none", "none (a vector per token)"),
                    ("rank", "rank (rerankers)"),
                ],
                default="mean",
                help_text="How an embeddings profile pools a text's tokens into one vector (llama-server --pooling).",
                max_length=8,
                verbose_name="pooling",
            ),
        ),
        migrations.RunPython(seed_embeddings_profile, migrations.RunPython.noop),
    ]
