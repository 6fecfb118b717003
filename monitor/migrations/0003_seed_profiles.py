"""Two profiles for the default model, so a fresh install chats at once."""

from pathlib import Path

from django.conf import settings
from django.db import migrations

TEMPLATE = Path(__file__).resolve().parent.parent / "chat_templates" / "gemma3.jinja"


def seed(apps, schema_editor):
    profile = apps.get_model("monitor", "ServerProfile")
    if profile.objects.exists():
        return
    common = {
        "model_file": settings.DEFAULT_MODEL_FILE,
        "chat_template_jinja": TEMPLATE.read_text(),
        "cache_type_k": "f16",
        "cache_type_v": "f16",
    }
    profile.objects.create(
        name="chat-8k",
        description="Fast chat, 8K context, 2 slots",
        is_default=True,
        ctx_size=8192,
        parallel=2,
        **common,
    )
    profile.objects.create(
        name="long-32k",
        description="Long documents, 32K context, 1 slot, q8_0 KV cache",
        ctx_size=32768,
        parallel=1,
        **{**common, "cache_type_k": "q8_0", "cache_type_v": "q8_0"},
    )


class Migration(migrations.Migration):
    dependencies = [("monitor", "0002_server_profile")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
