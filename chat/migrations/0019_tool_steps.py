"""Tools in a chat turn (issue 51): the person's switch per conversation, and an answer's tool steps.

``tool_steps`` is nullable so SQLite adds it in place (a column with a default would remake
chat_message and lose the search triggers and view of 0011)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0018_collections_in_chat"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="tools_enabled",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="message",
            name="tool_steps",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
