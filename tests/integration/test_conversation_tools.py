"""Conversation tools on the real database: search through the full-text index, edit a question
(replace or keep), export, delete many, and the system prompt and preset reaching llama-server.

Messages are made with the ORM: nothing here depends on what the model writes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from chat.conversations import editing, export, search, services
from chat.conversations.context import fit_messages, with_system_prompt
from chat.errors import ChatError, NotFound
from chat.knowledge.models import Collection
from chat.models import Conversation, Document, Message
from chat.web.forms import PromptSettingsForm
from monitor.public import close_loop_clients, serving_pool
from tests.support.client import chat_socket, events_until, login, make_user, send


def conversation_with(user, *pairs: tuple[str, str], title: str = "") -> Conversation:
    conversation = Conversation.objects.create(owner=user, title=title)
    for question, answer in pairs:
        Message.objects.create(conversation=conversation, role="user", content=question)
        Message.objects.create(conversation=conversation, role="assistant", content=answer)
    return conversation


def found(user, query: str) -> list[str]:
    return [hit.conversation_id for hit in search.search_conversations(user, query)]


def index_is_consistent() -> None:
    """FTS5's own check of an external-content index against the table it indexes."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO chat_message_fts(chat_message_fts, rank) VALUES ('integrity-check', 1)")


def browser_client(user) -> Client:
    client = Client(SERVER_NAME="127.0.0.1")
    client.force_login(user)
    return client


# Search


def test_search_finds_a_word_from_an_old_answer_and_only_the_owners():
    user, other = make_user(), make_user()
    old = conversation_with(user, ("tell me about birds", "The quetzalcoatlus was a huge pterosaur."), title="Birds")
    conversation_with(user, ("hello", "hi there"), title="Greeting")
    theirs = conversation_with(other, ("and you?", "Another quetzalcoatlus answer."))
    assert found(user, "quetzalcoatlus") == [str(old.id)]
    assert found(other, "quetzalcoatlus") == [str(theirs.id)]
    hit = search.search_conversations(user, "Quetzalcoatlus")[0]
    assert hit.title == "Birds" and "quetzalcoatlus" in hit.snippet
    # Every word must be there, in any one message; titles are searched too.
    assert found(user, "huge pterosaur") == [str(old.id)]
    assert found(user, "huge greeting") == []
    assert found(user, "greeting") != []
    # Words of one or two characters, and Chinese text without spaces.
    chinese = conversation_with(user, ("问题", "光合作用是植物利用阳光的过程。"))
    assert found(user, "光合作用") == [str(chinese.id)]
    assert found(user, "阳光") == [str(chinese.id)]
    # FTS5 syntax in the query is only text.
    assert found(user, 'quetzal* OR "') == []
    assert found(user, "   ") == []


@pytest.mark.database("sqlite")
def test_search_holds_when_more_messages_of_others_match_than_sqlite_binds():
    """The index matches every person's messages: they stay in the database as a subquery, never one
    bound variable each (SQLite refuses a statement past its variable limit: 'too many SQL variables')."""
    user, other = make_user(), make_user()
    mine = conversation_with(user, ("ubiquitous words", "yes"))
    theirs = Conversation.objects.create(owner=other)
    Message.objects.bulk_create(Message(conversation=theirs, role="user", content="ubiquitous") for _ in range(300))
    connection.ensure_connection()
    raw = connection.connection
    limit = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 200)  # this build's limit is higher; the test lowers it
    try:
        assert found(user, "ubiquitous") == [str(mine.id)]
    finally:
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)


def test_the_index_follows_create_update_and_delete():
    user = make_user()
    conversation = conversation_with(user, ("question", "an answer about zanzibarite crystals"))
    answer = conversation.messages.get(role="assistant")
    assert found(user, "zanzibarite") == [str(conversation.id)]
    # A streaming answer's text is saved again and again: the index follows each save.
    services.save_progress(answer.id, "now about wolframite instead", "")
    assert found(user, "zanzibarite") == []
    assert found(user, "wolframite") == [str(conversation.id)]
    services.finish_message(answer.id, content="finally obsidianite", reasoning="", status="complete")
    assert found(user, "wolframite") == [] and found(user, "obsidianite") == [str(conversation.id)]
    index_is_consistent()
    answer.delete()
    assert found(user, "obsidianite") == []
    Message.objects.create(conversation=conversation, role="assistant", content="pyromorphite")
    assert found(user, "pyromorphite") == [str(conversation.id)]
    services.delete_conversation(user, conversation.id)
    assert found(user, "pyromorphite") == []
    index_is_consistent()


def test_a_streaming_answer_is_indexed_once_it_ends_not_at_each_save():
    """Saves every 0.6 s would re-index the growing text each time (work that grows with the square of
    the answer's length): the index takes an answer in when it ends, and is consistent meanwhile."""
    user = make_user()
    conversation = conversation_with(user, ("question", "an older answer"))
    answer = Message.objects.create(conversation=conversation, role="assistant", status="streaming")
    services.save_progress(answer.id, "so far: vanadinite", "")
    index_is_consistent()
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:  # the index holds nothing of it yet: no delete, no insert
            cursor.execute("SELECT count(*) FROM chat_message_fts WHERE chat_message_fts MATCH '\"vanadinite\"'")
            assert cursor.fetchone()[0] == 0
    services.save_progress(answer.id, "so far: vanadinite and descloizite", "")
    index_is_consistent()
    services.finish_message(answer.id, content="vanadinite and descloizite", reasoning="", status="stopped")
    assert found(user, "descloizite") == [str(conversation.id)]
    index_is_consistent()
    # An answer left streaming by a web process that died is taken in when the sweep marks it incomplete.
    left = Message.objects.create(conversation=conversation, role="assistant", status="streaming")
    services.save_progress(left.id, "cut off while writing about mottramite", "")
    Message.objects.filter(id=left.id).update(updated_at=timezone.now() - dt.timedelta(hours=1))
    services.mark_orphaned_streams(older_than_s=60)
    assert Message.objects.get(id=left.id).status == "incomplete"
    assert found(user, "mottramite") == [str(conversation.id)]
    index_is_consistent()


def test_the_sweep_stops_the_tool_steps_a_dead_web_process_left_running_or_waiting():
    user = make_user()
    conversation = conversation_with(user, ("question", "an older answer"))
    steps = [
        {"id": "a1", "name": "calculator", "state": "done", "result": "42"},
        {"id": "b2", "name": "create_ticket", "state": "waiting", "result": ""},
        {"id": "c3", "name": "lookup_ticket", "state": "running", "result": ""},
    ]
    left = Message.objects.create(conversation=conversation, role="assistant", status="streaming", tool_steps=steps)
    plain = Message.objects.create(conversation=conversation, role="assistant", status="streaming")
    Message.objects.filter(id__in=[left.id, plain.id]).update(updated_at=timezone.now() - dt.timedelta(hours=1))
    services.mark_orphaned_streams(older_than_s=60)
    left.refresh_from_db()
    assert left.status == "incomplete" and Message.objects.get(id=plain.id).tool_steps is None
    assert [(step["state"], step["result"]) for step in left.tool_steps] == [
        ("done", "42"),
        ("stopped", "The server restarted before this tool call finished; whether it ran is not known."),
        ("stopped", "The server restarted before this tool call finished; whether it ran is not known."),
    ]


def test_a_save_of_the_text_so_far_stores_it_and_keeps_the_answer_alive_for_the_sweep():
    """A running answer's save writes its text and reasoning and refreshes updated_at, which is what tells
    the sweep a long answer from one a dead web process left: a save that did not would see it marked
    incomplete while it streams."""
    user = make_user()
    conversation = conversation_with(user, ("question", "an older answer"))
    answer = Message.objects.create(conversation=conversation, role="assistant", status="streaming")
    Message.objects.filter(id=answer.id).update(updated_at=timezone.now() - dt.timedelta(hours=1))
    services.save_progress(answer.id, "so far: pyromorphite", "weighing 'two' minerals; \\ and %s")
    services.mark_orphaned_streams(older_than_s=60)
    answer.refresh_from_db()
    assert (answer.content, answer.reasoning) == ("so far: pyromorphite", "weighing 'two' minerals; \\ and %s")
    assert answer.status == "streaming"
    assert abs((timezone.now() - answer.updated_at).total_seconds()) < 60
    assert Message.objects.filter(updated_at__gte=timezone.now() - dt.timedelta(minutes=1), id=answer.id).exists()


def test_search_page_shows_the_hit_as_text():
    user = make_user()
    conversation = conversation_with(user, ("q", "An answer with <b>markup</b> and the word heliotrope."))
    page = browser_client(user).get("/search/", {"q": "heliotrope"})
    assert page.status_code == 200
    body = page.content.decode()
    assert f"/c/{conversation.id}/" in body
    assert "&lt;b&gt;markup&lt;/b&gt;" in body and "<b>markup</b>" not in body


# Edit a question and ask again


def test_edit_replace_deletes_the_later_turns_and_changes_the_question():
    user = make_user()
    conversation = conversation_with(user, ("first question", "first answer"), ("second question", "second answer"))
    first = conversation.messages.get(content="first question")
    result = editing.edit_question(user, conversation.id, first.id, "  first question, edited ", keep_later=False)
    assert result.id == conversation.id
    assert list(conversation.messages.values_list("role", "content")) == [("user", "first question, edited")]
    assert found(user, "edited") == [str(conversation.id)] and found(user, "second") == []


def test_edit_keep_forks_and_leaves_the_original_untouched():
    user = make_user()
    conversation = conversation_with(
        user, ("first question", "first answer"), ("second question", "second answer"), title="Original"
    )
    conversation.system_prompt, conversation.sampling_preset = "Be brief.", "precise"
    conversation.tools_enabled = True
    conversation.save()
    handbook = Collection.objects.create(owner=user, name="Handbook", slug=f"handbook-{user.pk}")
    conversation.collections.set([handbook])
    before = list(conversation.messages.values_list("id", "role", "content"))
    second = conversation.messages.get(content="second question")
    copy = editing.edit_question(user, conversation.id, second.id, "second question, edited", keep_later=True)
    assert copy.id != conversation.id and copy.owner == user
    assert copy.title == "Original (edited)"
    assert (copy.system_prompt, copy.sampling_preset) == ("Be brief.", "precise")
    assert copy.tools_enabled and list(copy.collections.all()) == [handbook]
    assert list(copy.messages.values_list("role", "content")) == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question, edited"),
    ]
    assert list(conversation.messages.values_list("id", "role", "content")) == before


def test_edit_refusals():
    user, other = make_user(), make_user()
    conversation = conversation_with(user, ("question", "answer"))
    question = conversation.messages.get(role="user")
    answer = conversation.messages.get(role="assistant")
    with pytest.raises(NotFound):
        editing.edit_question(other, conversation.id, question.id, "mine now", keep_later=False)
    with pytest.raises(NotFound):
        editing.edit_question(user, conversation.id, answer.id, "not a question", keep_later=False)
    with pytest.raises(ChatError, match="The message is empty."):
        editing.edit_question(user, conversation.id, question.id, "   ", keep_later=False)
    answer.status = "streaming"
    answer.save()
    with pytest.raises(ChatError, match="An answer is still being written."):
        editing.edit_question(user, conversation.id, question.id, "changed", keep_later=False)
    assert conversation.messages.count() == 2 and question.content == "question"


def test_edit_view_flags_the_answer_once_and_names_a_bad_choice():
    user = make_user()
    conversation = conversation_with(user, ("question", "answer"))
    question = conversation.messages.get(role="user")
    client = browser_client(user)
    url = f"/c/{conversation.id}/m/{question.id}/edit/"
    refused = client.post(url, {"text": "changed", "mode": "sideways"}, follow=True)
    assert "Choose whether to replace the later messages or keep them." in refused.content.decode()
    response = client.post(url, {"text": "changed", "mode": "replace"})
    assert response.status_code == 302 and response["Location"] == f"/c/{conversation.id}/"
    assert 'data-regenerate="1"' in client.get(response["Location"]).content.decode()
    assert 'data-regenerate="1"' not in client.get(response["Location"]).content.decode()


# System prompt and sampling preset


def test_prompt_settings_are_an_allowlist_at_the_border():
    assert PromptSettingsForm({"system_prompt": "Be brief.", "preset": "creative"}).is_valid()
    form = PromptSettingsForm({"system_prompt": "", "preset": "temperature=9"})
    assert not form.is_valid() and form.errors["preset"] == ["Unknown sampling preset."]
    form = PromptSettingsForm({"system_prompt": "x" * 4001, "preset": ""})
    assert form.errors["system_prompt"] == ["A system prompt can have at most 4000 characters."]
    user = make_user()
    conversation = conversation_with(user)
    with pytest.raises(ChatError, match="Unknown sampling preset."):
        services.update_prompt_settings(user, conversation.id, system_prompt="", preset="wild")


def test_system_prompt_goes_first_and_joins_the_documents_message():
    turns = [{"role": "user", "content": "hi"}]
    assert with_system_prompt(turns, "") == turns
    assert with_system_prompt(turns, "Be brief.") == [{"role": "system", "content": "Be brief."}, *turns]
    with_documents = [{"role": "system", "content": "Document summary"}, *turns]
    assert with_system_prompt(with_documents, "Be brief.") == [
        {"role": "system", "content": "Be brief.\n\nDocument summary"},
        *turns,
    ]


# Export


def test_export_markdown_and_json_keep_the_text_as_text():
    user = make_user()
    hostile = "Look: <script>alert(1)</script> and **bold**"
    conversation = conversation_with(user, ("a question", hostile), title="Export me")
    conversation.system_prompt = "Answer in verse."
    conversation.save()
    data = export.export_json(conversation)
    assert data["format"] == "qwenweb-conversation" and data["title"] == "Export me"
    assert data["system_prompt"] == "Answer in verse."
    assert [(m["role"], m["content"]) for m in data["messages"]] == [("user", "a question"), ("assistant", hostile)]
    markdown = export.export_markdown(conversation)
    assert markdown.startswith("# Export me\n")
    assert "## You\n\na question" in markdown and f"## Assistant\n\n{hostile}" in markdown
    assert "> Answer in verse." in markdown

    client = browser_client(user)
    response = client.get(f"/c/{conversation.id}/export.md")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment; filename=")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert hostile in response.content.decode()
    response = client.get(f"/c/{conversation.id}/export.json")
    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert "attachment" in response["Content-Disposition"] and ".json" in response["Content-Disposition"]
    assert json.loads(response.content)["messages"][1]["content"] == hostile
    # Another person's conversation does not exist for them.
    assert browser_client(make_user()).get(f"/c/{conversation.id}/export.json").status_code == 404


# Delete many


def test_delete_many_touches_only_the_owners():
    user, other = make_user(), make_user()
    mine = [conversation_with(user, ("q", f"answer {n}")) for n in range(3)]
    theirs = conversation_with(other, ("q", "their answer"))
    Document.objects.create(owner=user, conversation=mine[0], name="notes.txt", kind="txt")
    assert services.delete_conversations(user, [mine[0].id, mine[1].id, theirs.id]) == 2
    assert list(Conversation.objects.filter(owner=user)) == [mine[2]]
    assert Conversation.objects.filter(id=theirs.id).exists()
    assert not Document.objects.filter(owner=user).exists()

    client = browser_client(user)
    refused = client.post("/c/delete-many/", {"ids": [str(mine[2].id), str(theirs.id)]}, follow=True)
    assert "One of the chosen conversations does not exist." in refused.content.decode()
    assert Conversation.objects.filter(id__in=[mine[2].id, theirs.id]).count() == 2
    done = client.post("/c/delete-many/", {"ids": [str(mine[2].id)]}, follow=True)
    assert "1 conversation deleted." in done.content.decode()
    assert not Conversation.objects.filter(owner=user).exists()


# The turn that llama-server gets


def rendered_tokens(messages: list[dict]) -> int:
    """What the default profile's llama-server makes of these messages: its template, its tokenizer."""

    async def count() -> int:
        client = (await serving_pool(None)).client
        try:
            return await client.count_tokens(await client.apply_template(messages))
        finally:
            await close_loop_clients()

    return asyncio.run(count())


@pytest.mark.usefixtures("web_server")
def test_system_prompt_and_preset_reach_llama_server(llama):
    """The request llama-server got, as its /slots reports it: the sampling of the preset, and a
    prompt as long as the rendering with the system prompt (its text is not reported without
    LLAMA_SERVER_SLOTS_DEBUG); that it comes first: test_system_prompt_goes_first_and_joins_the_documents_message."""
    system, question = (
        "You are Marker-7Q3, a pirate; answer every question like a pirate would.",
        "Where is the harbour?",
    )
    user = make_user()
    conversation = Conversation.objects.create(owner=user, system_prompt=system, sampling_preset="precise")
    with chat_socket(login(user)) as ws:
        send(ws, type="send", conversation=str(conversation.id), text=question, options={"max_tokens": 4})
        events = events_until(ws)
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-1]
    slot = max(llama.slots(), key=lambda slot: slot.get("id_task", -1))
    params = slot["params"]
    assert params["temperature"] == pytest.approx(0.2), slot
    assert params["top_p"] == pytest.approx(0.8)
    assert params["top_k"] == 20
    assert params["min_p"] == pytest.approx(0.05)
    assert params["n_predict"] == 4  # this turn's request
    with_system = rendered_tokens([{"role": "system", "content": system}, {"role": "user", "content": question}])
    without = rendered_tokens([{"role": "user", "content": question}])
    # The slot's tokens are the prompt and then the (at most 4) tokens it wrote.
    assert with_system <= slot["n_prompt_tokens"] <= with_system + 4, (slot["n_prompt_tokens"], with_system)
    assert slot["n_prompt_tokens"] > without + 4


def test_the_system_prompt_counts_when_the_conversation_is_fitted(llama):
    """Counted by llama-server's own template and tokenizer: with a long system prompt the oldest
    turns make way, and the system prompt itself is kept first."""
    turns = []
    for index in range(4):
        turns.append({"role": "user" if index % 2 == 0 else "assistant", "content": "word " * 30})
    system = "Always answer in the style of a ship's log. " * 8

    async def fit(messages):
        client = (await serving_pool(None)).client
        try:
            return await fit_messages(client, messages, 256, "system-prompt-test")
        finally:
            await close_loop_clients()

    assert asyncio.run(fit(turns)).dropped == 0
    fitted = asyncio.run(fit(with_system_prompt(turns, system)))
    assert fitted.dropped > 0
    assert fitted.messages[0] == {"role": "system", "content": system}
