"""The Simplified Chinese catalogues, django.po (templates, Python) and djangojs.po (page scripts, served by
the JavaScript catalogue): complete, placeholder-safe, one plural form, and loaded by Django."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polib
import pytest
from django.utils import translation

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES"
DOMAINS = ("django", "djangojs")
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|%\(\w+\)\.\d+f")


@pytest.fixture(scope="module", params=DOMAINS)
def catalogue(request) -> polib.POFile:
    return polib.pofile(str(MESSAGES / f"{request.param}.po"))


@pytest.fixture(scope="module")
def compiled():
    """Compile the .po files to .mo (they are git-ignored) and make Django reload its catalogues."""
    subprocess.run([sys.executable, "scripts/compile_messages.py"], check=True, cwd=ROOT)
    for domain in DOMAINS:
        assert (MESSAGES / f"{domain}.mo").exists()
    from django.utils.translation import trans_real

    trans_real._translations = {}
    yield


def test_header(catalogue):
    assert catalogue.metadata["Language"] == "zh_Hans"
    assert "charset=UTF-8" in catalogue.metadata["Content-Type"]
    assert catalogue.metadata["Plural-Forms"].replace(" ", "") == "nplurals=1;plural=0;"
    assert not catalogue.metadata_is_fuzzy


def test_every_entry_translated(catalogue):
    entries = [entry for entry in catalogue if not entry.obsolete]
    assert entries
    untranslated = [entry.msgid for entry in entries if not entry.translated()]
    fuzzy = [entry.msgid for entry in entries if "fuzzy" in entry.flags]
    assert untranslated == []
    assert fuzzy == []
    assert catalogue.percent_translated() == 100


def test_placeholders_match(catalogue):
    mismatched = []
    for entry in catalogue:
        if entry.obsolete:
            continue
        translations = [entry.msgstr] if not entry.msgid_plural else list(entry.msgstr_plural.values())
        if entry.msgid_plural:
            assert list(entry.msgstr_plural) == [0], entry.msgid  # nplurals=1: one form for every count
        expected = set(PLACEHOLDER.findall(entry.msgid)) | set(PLACEHOLDER.findall(entry.msgid_plural or ""))
        for text in translations:
            if set(PLACEHOLDER.findall(text)) != expected:
                mismatched.append((entry.msgid, text))
    assert mismatched == []


def test_placeholders_format(catalogue):
    """Each python-format msgstr accepts the same keyword arguments as its msgid (and msgid_plural)."""
    for entry in catalogue:
        if "python-format" not in entry.flags:
            continue
        names = {name: 1 for name in re.findall(r"%\((\w+)\)", entry.msgid + (entry.msgid_plural or ""))}
        for text in [entry.msgstr] if not entry.msgid_plural else list(entry.msgstr_plural.values()):
            assert text % names


def test_django_uses_chinese(compiled):
    with translation.override("zh-hans"):
        assert translation.gettext("Stop") == "停止"
        assert translation.gettext("Thinking") == "思考过程"
        assert translation.gettext("Regenerate") == "重新生成"
        assert translation.gettext("Log out") == "退出登录"
    with translation.override("en"):
        assert translation.gettext("Stop") == "Stop"


def test_scripts_get_chinese_from_the_javascript_catalogue(compiled):
    """The catalogue the pages load (qwenweb/script_catalogue.py): djangojs strings, plurals included, in the
    language its URL names, whatever the request's own language; a language we do not have is a 404."""
    from django.test import Client

    client = Client(SERVER_NAME="127.0.0.1", HTTP_ACCEPT_LANGUAGE="en")
    response = client.get("/i18n/js/zh-hans/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert "no-cache" in response["Cache-Control"] and response["Last-Modified"]
    script = response.content.decode()
    assert '"Copy message": "\\u590d\\u5236\\u6d88\\u606f"' in script  # 复制消息, as JSON escapes it
    assert '"%(done)s of %(total)s page read": [' in script  # ngettext's forms
    assert "Log out" not in script  # only the scripts' domain, not the templates'
    english = client.get("/i18n/js/en/").content.decode()
    assert "Copy message" not in english  # no catalogue: gettext gives the English it was given
    assert client.get("/i18n/js/fr/").status_code == 404
    revalidated = client.get("/i18n/js/zh-hans/", HTTP_IF_MODIFIED_SINCE=response["Last-Modified"])
    assert revalidated.status_code == 304


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> dict[str, polib.POFile]:
    """The catalogues makemessages makes from a copy of the tree now (domain -> catalogue): every string
    the code, templates and page scripts hold."""
    tmp_path = tmp_path_factory.mktemp("makemessages")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in tracked.splitlines():
        source = ROOT / name
        if source.is_file() and not name.startswith(("static/vendor/", "bench/")):
            target = tmp_path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    env = {"PATH": "/usr/bin:/bin", "QWENWEB_VAR_DIR": str(tmp_path / "var"), "DJANGO_SECRET_KEY": "x" * 50}
    ignore = ["--ignore", "tests/*", "--ignore", "scripts/*", "--ignore", "static/vendor/*"]
    for domain in DOMAINS:
        subprocess.run(
            [sys.executable, "manage.py", "makemessages", "-d", domain, "-l", "zh_Hans", *ignore],
            cwd=tmp_path,
            env=env,
            check=True,
            capture_output=True,
        )
    return {
        domain: polib.pofile(str(tmp_path / "locale" / "zh_Hans" / "LC_MESSAGES" / f"{domain}.po"))
        for domain in DOMAINS
    }


def test_every_string_in_the_code_has_a_translation(extracted):
    """makemessages over a copy of the tree finds no string either catalogue lacks or has only fuzzily."""
    for domain, catalogue in extracted.items():
        live = [entry for entry in catalogue if not entry.obsolete]
        assert live, domain
        missing = [entry.msgid for entry in live if not entry.translated() or "fuzzy" in entry.flags]
        assert missing == [], domain


# A count shown to people goes through ngettext ({% blocktranslate count %} in a template, ngettext() in a
# page script): "1 page",
# "2 pages"; Chinese has the one form. The rule, on every string of the code and of the catalogue:
# an entry that is not a plural one puts no number placeholder next to an English plural noun,
#   "%(n)d pages", "%(n)d earlier messages": a placeholder followed, at most one word on, by a word
#       ending in "s" that is not a verb or a unit (NOT_PLURAL_NOUNS);
#   "Pages %(pages)s are", "on pages %(pages)s": such a word right before the placeholder.
# A label's colon ("MTP blocks: %(mtp)s") and a unit's symbol ("%(s)d s", "%(mb)d MB") are fine, and
# placeholders named for text (TEXT_PLACEHOLDERS: a name, a URL, a reason) hold no count.
PLACEHOLDER_AT = re.compile(r"%\((\w+)\)(?:\.\d+)?[sdf]")
WORD_AFTER = re.compile(r"[ ]+([A-Za-z/-]+)(?:[ ]+([A-Za-z/-]+))?")
WORD_BEFORE = re.compile(r"([A-Za-z]+)[ ]+$")
NOT_PLURAL_NOUNS = frozenset(
    {"is", "was", "has", "does", "this", "its", "as", "us", "plus", "always", "yes", "less", "unless", "across"}
    | {"process", "address", "status", "access", "tokens/s", "tok/s", "ms"}
)
TEXT_PLACEHOLDERS = frozenset(
    {"name", "url", "reason", "kind", "arch", "processname", "title", "query", "model", "id", "where", "why"}
    | {"error", "problem", "option", "value", "path", "method", "step", "profile", "username", "date", "at"}
    | {"types", "ids", "roles", "choices", "shape", "media", "actual", "low", "high", "percent"}
    # sizes already formatted ("1.2 GB", filesizeformat) and an option's values ("from 4 to 2")
    | {"size", "saves", "short", "budget", "ram", "current", "suggested"}
)


def _plural_noun(word: str | None) -> bool:
    return bool(word) and len(word) >= 3 and word.lower().endswith("s") and word.lower() not in NOT_PLURAL_NOUNS


def counts_in_the_singular(entries) -> list[str]:
    """The msgids of singular-only entries that put a count next to a plural noun (the rule above)."""
    found = []
    for entry in entries:
        if entry.obsolete or entry.msgid_plural:
            continue
        for match in PLACEHOLDER_AT.finditer(entry.msgid):
            if match.group(1) in TEXT_PLACEHOLDERS:
                continue
            after = WORD_AFTER.match(entry.msgid, match.end())
            before = WORD_BEFORE.search(entry.msgid[: match.start()])
            if (after and (_plural_noun(after.group(1)) or _plural_noun(after.group(2)))) or (
                before and _plural_noun(before.group(1))
            ):
                found.append(entry.msgid)
                break
    return found


def test_the_rule_catches_a_count_formatted_into_a_singular_string():
    def entry(msgid: str, plural: str = "") -> polib.POEntry:
        return polib.POEntry(msgid=msgid, msgid_plural=plural)

    caught = ["%(n)d widgets.", "Pages %(pages)s are scanned images.", "%(count)d earlier messages were left out."]
    caught += ["No text on pages %(pages)s.", "valid {days} days".replace("{days}", "%(days)s")]
    fine = ["Loading %(name)s…", "MTP blocks: %(mtp)s.", "after %(seconds).0f s.", "the limit is %(mb)d MB."]
    fine += ["%(name)s does not match", "Waiting in line: you are number %(position)s."]
    entries = [entry(msgid) for msgid in caught + fine] + [entry("%(n)d widget.", "%(n)d widgets.")]
    assert counts_in_the_singular(entries) == caught


def test_no_count_is_formatted_into_a_singular_string(catalogue, extracted):
    """The scripts' counts too: they go through ngettext (djangojs)."""
    assert counts_in_the_singular(catalogue) == []
    for domain, extraction in extracted.items():
        assert counts_in_the_singular(extraction) == [], domain


def test_no_template_puts_a_count_before_a_word_translated_alone():
    """``{{ n }} {% translate "cells" %}`` is a count formatted into a singular string too."""
    variable_then_word = re.compile(r"\}\}\s*\{%\s*(?:translate|trans)\s+\"([A-Za-z/-]+)")
    found = [
        f"{path.relative_to(ROOT)}: {word}"
        for path in sorted((ROOT / "templates").rglob("*.html"))
        for word in variable_then_word.findall(path.read_text())
        if _plural_noun(word)
    ]
    assert found == []
