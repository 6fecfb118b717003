"""Knowledge search's words on PostgreSQL: the table 0013 makes on SQLite alone (an FTS5 table there).

Here ``chat_knowledge_fts`` holds each passage's words as a ``tsvector`` (the ``simple`` configuration:
lower case, no stemming, as the SQLite side's terms), with a GIN index, and goes with its passage by the
foreign key's ``ON DELETE CASCADE`` (SQLite's trigger does the same). On SQLite this step does nothing.
"""

from django.db import migrations

FTS_TABLE = "chat_knowledge_fts"
CREATE = [
    f"CREATE TABLE {FTS_TABLE} (rowid bigint PRIMARY KEY "
    f"REFERENCES chat_knowledgepassage (id) ON DELETE CASCADE, terms tsvector NOT NULL)",
    f"CREATE INDEX {FTS_TABLE}_terms ON {FTS_TABLE} USING gin (terms)",
]
DROP = [f"DROP TABLE IF EXISTS {FTS_TABLE}"]


def _on_postgresql(statements: list[str]):
    def run(apps, schema_editor) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        for statement in statements:
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("chat", "0013_knowledge")]

    operations = [migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP))]
