"""SQLite's full-text index leaves an answer out while it streams, and takes it in once it ends.

A streaming answer's partial text is saved every CHAT_SAVE_INTERVAL_S (0.6 s: a crash keeps what the
page showed), and 0006's trigger re-indexed the whole text at each save: every trigram of a growing
text taken out and put back, so an answer's index work grew with the square of its length (a
12 KB answer, 170 saves: about 0.4 s of CPU against 0.001 s for the same updates unindexed).

Now the index's external content is the view ``chat_message_searchable``: a streaming row's text is
empty there, so the triggers fire only when that view's text changes (an answer that ends, stops or is
marked incomplete; any edit of a finished one), and FTS5's own integrity check, which reads the view,
holds at every moment. Search finds an answer once it has ended. PostgreSQL keeps 0006's GIN index.
"""

from django.db import migrations

SEARCHABLE = "CASE WHEN {row}.status = 'streaming' THEN '' ELSE {row}.content END"
OLD, NEW = SEARCHABLE.format(row="old"), SEARCHABLE.format(row="new")

SQLITE_FORWARD = [
    "DROP TRIGGER IF EXISTS chat_message_fts_insert",
    "DROP TRIGGER IF EXISTS chat_message_fts_delete",
    "DROP TRIGGER IF EXISTS chat_message_fts_update",
    "DROP TABLE IF EXISTS chat_message_fts",
    "CREATE VIEW chat_message_searchable AS SELECT id, "
    + SEARCHABLE.format(row="chat_message")
    + " AS content FROM chat_message",
    "CREATE VIRTUAL TABLE chat_message_fts USING fts5("
    "content, content='chat_message_searchable', content_rowid='id', tokenize='trigram')",
    # FTS5 keeps an entry for every row, an empty one included: each trigger gives the view's value.
    f"CREATE TRIGGER chat_message_fts_insert AFTER INSERT ON chat_message BEGIN "
    f"INSERT INTO chat_message_fts(rowid, content) VALUES (new.id, {NEW}); END",
    f"CREATE TRIGGER chat_message_fts_delete AFTER DELETE ON chat_message BEGIN "
    f"INSERT INTO chat_message_fts(chat_message_fts, rowid, content) VALUES ('delete', old.id, {OLD}); END",
    f"CREATE TRIGGER chat_message_fts_update AFTER UPDATE OF content, status ON chat_message "
    f"WHEN ({OLD}) IS NOT ({NEW}) BEGIN "
    f"INSERT INTO chat_message_fts(chat_message_fts, rowid, content) VALUES ('delete', old.id, {OLD}); "
    f"INSERT INTO chat_message_fts(rowid, content) VALUES (new.id, {NEW}); END",
    "INSERT INTO chat_message_fts(chat_message_fts) VALUES ('rebuild')",
]


def _sqlite(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for statement in statements:
                schema_editor.execute(statement)

    return run


def _backward():
    """0006's index: every save re-indexed."""
    from importlib import import_module

    previous = import_module("chat.migrations.0006_conversation_settings_search")
    return [
        "DROP TRIGGER IF EXISTS chat_message_fts_insert",
        "DROP TRIGGER IF EXISTS chat_message_fts_delete",
        "DROP TRIGGER IF EXISTS chat_message_fts_update",
        "DROP TABLE IF EXISTS chat_message_fts",
        "DROP VIEW IF EXISTS chat_message_searchable",
        *previous.SQLITE_CREATE,
    ]


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0010_scan_reader"),
    ]

    operations = [
        migrations.RunPython(_sqlite(SQLITE_FORWARD), _sqlite(_backward())),
    ]
