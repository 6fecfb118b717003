"""A conversation's system prompt and sampling preset; the full-text index over message text.

SQLite: an FTS5 table over ``chat_message.content`` (external content, trigram tokenizer so
Chinese text, which has no spaces between words, is found too), kept in sync by triggers on
every insert, update of the text and delete (a conversation's cascade included).
PostgreSQL: a GIN index on the text's ``to_tsvector('simple', …)``, the expression
chat/conversations/search.py queries.
"""

from django.db import migrations, models

SQLITE_CREATE = [
    "CREATE VIRTUAL TABLE chat_message_fts USING fts5("
    "content, content='chat_message', content_rowid='id', tokenize='trigram')",
    "CREATE TRIGGER chat_message_fts_insert AFTER INSERT ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER chat_message_fts_delete AFTER DELETE ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, content) VALUES ('delete', old.id, old.content); END",
    "CREATE TRIGGER chat_message_fts_update AFTER UPDATE OF content ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "INSERT INTO chat_message_fts(rowid, content) VALUES (new.id, new.content); END",
    "INSERT INTO chat_message_fts(chat_message_fts) VALUES ('rebuild')",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS chat_message_fts_insert",
    "DROP TRIGGER IF EXISTS chat_message_fts_delete",
    "DROP TRIGGER IF EXISTS chat_message_fts_update",
    "DROP TABLE IF EXISTS chat_message_fts",
]
POSTGRES_CREATE = [
    "CREATE INDEX chat_message_fts ON chat_message USING gin (to_tsvector('simple', content))",
]
POSTGRES_DROP = ["DROP INDEX IF EXISTS chat_message_fts"]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0005_document_attempts"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="system_prompt",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="conversation",
            name="sampling_preset",
            field=models.CharField(blank=True, max_length=16),
        ),
        migrations.RunPython(
            _run({"sqlite": SQLITE_CREATE, "postgresql": POSTGRES_CREATE}),
            _run({"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}),
        ),
    ]
