"""The full-text index leaves out an answer while it streams.

A streaming answer's partial text is saved about twice a second (CHAT_SAVE_INTERVAL_S) so a web
process that dies keeps it; under migration 0006's triggers each of those saves took the whole text
out of the trigram index and put it back. Now a message is indexed when it stops streaming (complete,
stopped, incomplete, error) and its saves while streaming touch only its row. Each trigger's guard
matches what the index holds: a row is in it exactly when its status is not 'streaming' (FTS5's
external-content 'delete' must be given the very text that was indexed).

PostgreSQL's GIN index (0006) is left as it is: it is not rebuilt per save the way FTS5's is.
"""

from importlib import import_module

from django.db import migrations

INDEXED = "status <> 'streaming'"
SQLITE_DROP_OLD = [
    "DROP TRIGGER IF EXISTS chat_message_fts_insert",
    "DROP TRIGGER IF EXISTS chat_message_fts_delete",
    "DROP TRIGGER IF EXISTS chat_message_fts_update",
]
SQLITE_CREATE = [
    *SQLITE_DROP_OLD,
    f"CREATE TRIGGER chat_message_fts_insert AFTER INSERT ON chat_message WHEN new.{INDEXED} BEGIN "
    "INSERT INTO chat_message_fts(rowid, content) VALUES (new.id, new.content); END",
    f"CREATE TRIGGER chat_message_fts_delete AFTER DELETE ON chat_message WHEN old.{INDEXED} BEGIN "
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, content) VALUES ('delete', old.id, old.content); END",
    # One trigger, its two steps in this order (out, then in), each run only when its side is indexed.
    "CREATE TRIGGER chat_message_fts_update AFTER UPDATE OF content, status ON chat_message "
    f"WHEN old.{INDEXED} OR new.{INDEXED} BEGIN "
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, content) "
    f"SELECT 'delete', old.id, old.content WHERE old.{INDEXED}; "
    f"INSERT INTO chat_message_fts(rowid, content) SELECT new.id, new.content WHERE new.{INDEXED}; END",
    # Answers streaming now were indexed by the old triggers: rebuild, then take them out.
    "INSERT INTO chat_message_fts(chat_message_fts) VALUES ('rebuild')",
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, content) "
    "SELECT 'delete', id, content FROM chat_message WHERE status = 'streaming'",
]
# Back to 0006's triggers (its statements after the table's creation: the triggers, then a rebuild).
SQLITE_RESTORE = [
    *SQLITE_DROP_OLD,
    *import_module("chat.migrations.0006_conversation_settings_search").SQLITE_CREATE[1:],
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for statement in statements:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0010_scan_reader"),
    ]

    operations = [migrations.RunPython(_run(SQLITE_CREATE), _run(SQLITE_RESTORE))]
