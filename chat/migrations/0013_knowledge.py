"""Knowledge bases: collections, their shares and documents, passages and their vectors.

On SQLite, the passages' words go in an FTS5 table (``chat_knowledge_fts``, rowid = the passage's id),
emptied of a passage's row by a trigger the moment the passage is deleted, however it is deleted. On
PostgreSQL this step does nothing yet (knowledge search answers only on SQLite; docs/knowledge.md).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

FTS_TABLE = "chat_knowledge_fts"
CREATE = [
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(terms, tokenize = 'unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER chat_knowledge_fts_delete AFTER DELETE ON chat_knowledgepassage "
    f"BEGIN DELETE FROM {FTS_TABLE} WHERE rowid = old.id; END",
]
DROP = ["DROP TRIGGER IF EXISTS chat_knowledge_fts_delete", f"DROP TABLE IF EXISTS {FTS_TABLE}"]


def _on_sqlite(statements: list[str]):
    def run(apps, schema_editor) -> None:
        if schema_editor.connection.vendor != "sqlite":
            return
        for statement in statements:
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0012_groups"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="KnowledgePassage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("index", models.PositiveIntegerField()),
                ("page", models.PositiveIntegerField()),
                ("text", models.TextField()),
            ],
            options={
                "ordering": ["document", "index"],
            },
        ),
        migrations.CreateModel(
            name="Collection",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100, verbose_name="name")),
                ("slug", models.SlugField(unique=True, verbose_name="mention")),
                ("shared_with_everyone", models.BooleanField(default=False)),
                ("embed_model_file", models.CharField(blank=True, max_length=255)),
                ("embed_model_sha256", models.CharField(blank=True, max_length=64)),
                ("embed_dimensions", models.PositiveIntegerField(default=0)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="collections",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["name"],
            },
        ),
        migrations.CreateModel(
            name="CollectionDocument",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("waiting", "Waiting to be read"),
                            ("indexing", "Indexing"),
                            ("indexed", "Indexed"),
                            ("failed", "Failed"),
                        ],
                        default="waiting",
                        max_length=16,
                    ),
                ),
                ("error", models.TextField(blank=True)),
                ("passages_done", models.PositiveIntegerField(default=0)),
                ("passage_count", models.PositiveIntegerField(default=0)),
                (
                    "collection",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="entries", to="chat.collection"
                    ),
                ),
                (
                    "document",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="collection_entry", to="chat.document"
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="KnowledgeVector",
            fields=[
                (
                    "passage",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="vector",
                        serialize=False,
                        to="chat.knowledgepassage",
                    ),
                ),
                ("vector", models.BinaryField()),
            ],
        ),
        migrations.AddField(
            model_name="knowledgepassage",
            name="collection",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="passages", to="chat.collection"
            ),
        ),
        migrations.AddField(
            model_name="knowledgepassage",
            name="document",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="knowledge_passages", to="chat.document"
            ),
        ),
        migrations.CreateModel(
            name="CollectionShare",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "access",
                    models.CharField(choices=[("read", "read"), ("edit", "edit")], default="read", max_length=8),
                ),
                (
                    "collection",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="shares", to="chat.collection"
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="collection_shares",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("collection", "user"), name="collection_share_unique")],
            },
        ),
        migrations.AddConstraint(
            model_name="knowledgepassage",
            constraint=models.UniqueConstraint(fields=("document", "index"), name="knowledge_passage_unique"),
        ),
        migrations.RunPython(_on_sqlite(CREATE), _on_sqlite(DROP)),
    ]
