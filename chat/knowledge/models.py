"""Knowledge bases' rows (app ``chat``; imported by the app's ready()): collections, their shares with
people and groups, their documents and how far each was indexed, passages and their vectors, and the
passages an answer was given."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Collection(models.Model):
    """A knowledge base shared with people, groups or (by staff) everyone; its vectors' model recorded."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="collections")
    name = models.CharField(_("name"), max_length=100)
    slug = models.SlugField(_("mention"), max_length=50, unique=True)  # typed after "#" in a chat, lower case
    shared_with_everyone = models.BooleanField(default=False)
    embed_model_file = models.CharField(max_length=255, blank=True)
    embed_model_sha256 = models.CharField(max_length=64, blank=True)
    embed_dimensions = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class CollectionShare(models.Model):
    """A named person's access to a collection: read, or edit (add and delete documents)."""

    class Access(models.TextChoices):
        READ = "read", _("read")
        EDIT = "edit", _("edit")

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="shares")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="collection_shares")
    access = models.CharField(max_length=8, choices=Access.choices, default=Access.READ)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["collection", "user"], name="collection_share_unique")]


class CollectionGroupShare(models.Model):
    """A group's access to a collection (its members read, or edit)."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="group_shares")
    group = models.ForeignKey("auth.Group", on_delete=models.CASCADE, related_name="collection_shares")
    access = models.CharField(max_length=8, choices=CollectionShare.Access.choices, default=CollectionShare.Access.READ)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["collection", "group"], name="collection_group_share_unique")]


class CollectionDocument(models.Model):
    """A document of a collection (read by the documents' pipeline) and how far its indexing went."""

    class State(models.TextChoices):
        WAITING = "waiting", _("Waiting to be read")
        INDEXING = "indexing", _("Indexing")
        INDEXED = "indexed", _("Indexed")
        FAILED = "failed", _("Failed")

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="entries")
    document = models.OneToOneField("chat.Document", on_delete=models.CASCADE, related_name="collection_entry")
    state = models.CharField(max_length=16, choices=State.choices, default=State.WAITING)
    error = models.TextField(blank=True)  # why it could not be read or indexed, shown in the collection
    passages_done = models.PositiveIntegerField(default=0)
    passage_count = models.PositiveIntegerField(default=0)


class KnowledgePassage(models.Model):
    """A piece of a collection's document (about KNOWLEDGE_PASSAGE_TOKENS tokens, within one page); its words
    in the FTS5 table ``chat_knowledge_fts`` (rowid = this id; a trigger deletes them with it)."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="passages")
    document = models.ForeignKey("chat.Document", on_delete=models.CASCADE, related_name="knowledge_passages")
    index = models.PositiveIntegerField()
    page = models.PositiveIntegerField()
    text = models.TextField()

    class Meta:
        ordering = ["document", "index"]
        constraints = [models.UniqueConstraint(fields=["document", "index"], name="knowledge_passage_unique")]


class KnowledgeVector(models.Model):
    """A passage's embedding: float32, unit length, by the collection's recorded model."""

    passage = models.OneToOneField(KnowledgePassage, on_delete=models.CASCADE, primary_key=True, related_name="vector")
    vector = models.BinaryField()


class AnswerPassage(models.Model):
    """A passage an answer was given: a source its citations open (while its collection is readable)."""

    message = models.ForeignKey("chat.Message", on_delete=models.CASCADE, related_name="knowledge_passages")
    passage = models.ForeignKey(KnowledgePassage, on_delete=models.CASCADE, related_name="answers")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["message", "passage"], name="answer_passage_unique")]
