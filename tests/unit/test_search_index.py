"""The full-text index (SQLite FTS5, migration 0011) leaves an answer out while it streams, so the saves
of its partial text do not re-index it, and takes it in when it stops: search finds the final text, and
the index agrees with the messages table (FTS5's own integrity check against its content table) after
an answer is saved while streaming, finished, set streaming again, and deleted mid-stream."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from chat.conversations.search import search_conversations
from chat.conversations.services import finish_message, save_progress
from chat.models import Conversation, Message

pytestmark = pytest.mark.skipif(connection.vendor != "sqlite", reason="the FTS5 index is SQLite's")


def index_agrees_with_the_table() -> None:
    """Raises (SQLITE_CORRUPT_VTAB) where an indexed row's text is not what the index holds."""
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO chat_message_fts(chat_message_fts, rank) VALUES ('integrity-check', 1)")


def index_agrees_with_the_table_but_for_streaming(message_id: int) -> None:
    """The check compares every row of the table; a streaming row is meant to be missing from the index,
    so it is checked with that row's status set aside for a moment (in a savepoint rolled back)."""

    class Rollback(Exception):
        pass

    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                # Neither side in the index: the triggers leave the index alone.
                cursor.execute("DROP TRIGGER chat_message_fts_delete")
                cursor.execute("DELETE FROM chat_message WHERE id = %s", [message_id])
            index_agrees_with_the_table()
            raise Rollback
    except Rollback:
        pass


def indexed(word: str) -> set[int]:
    """The messages the index itself finds the word in (a scan of an external-content table reads the
    table, not the index)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rowid FROM chat_message_fts WHERE chat_message_fts MATCH %s", [f'"{word}"'])
        return {row[0] for row in cursor.fetchall()}


def test_a_streaming_answer_is_indexed_once_it_stops():
    user = get_user_model().objects.create_user(f"fts-{uuid.uuid4().hex[:8]}", password="x")
    conversation = Conversation.objects.create(owner=user)
    question = Message.objects.create(conversation=conversation, role="user", content="tell me of ammonites")
    answer = Message.objects.create(conversation=conversation, role="assistant", status="streaming")
    assert indexed("ammonites") == {question.id}

    for text in ("Spiral", "Spiral shells of belemnites", "Spiral shells of ammonites"):
        save_progress(answer.id, text, "")
    assert indexed("ammonites") == {question.id}  # the partial saves touched only the row
    assert [hit.snippet for hit in search_conversations(user, "belemnites")] == []
    index_agrees_with_the_table_but_for_streaming(answer.id)

    finish_message(answer.id, content="Spiral shells of ammonites, coiled.", reasoning="", status="complete")
    assert indexed("ammonites") == {question.id, answer.id}
    assert [hit.snippet for hit in search_conversations(user, "coiled")] == ["Spiral shells of ammonites, coiled."]
    index_agrees_with_the_table()

    # Answered again (streaming once more): out of the index, with the very text it held.
    Message.objects.filter(id=answer.id).update(status="streaming", content="")
    assert indexed("ammonites") == {question.id}
    assert search_conversations(user, "coiled") == []
    index_agrees_with_the_table_but_for_streaming(answer.id)

    # Deleted while streaming (its conversation deleted): nothing of it was in the index to take out.
    save_progress(answer.id, "half an answer", "")
    conversation.delete()
    assert indexed("ammonites") == indexed("half") == set()
    index_agrees_with_the_table()
