"""The Simplified Chinese catalogue: complete, placeholder-safe, and loaded by Django."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polib
import pytest
from django.utils import translation

ROOT = Path(__file__).resolve().parents[2]
PO_PATH = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|%\(\w+\)\.\d+f")


@pytest.fixture(scope="module")
def catalogue() -> polib.POFile:
    return polib.pofile(str(PO_PATH))


@pytest.fixture(scope="module")
def compiled():
    """Compile the .po to .mo (it is git-ignored) and make Django reload its catalogues."""
    subprocess.run([sys.executable, "scripts/compile_messages.py"], check=True, cwd=ROOT)
    assert PO_PATH.with_suffix(".mo").exists()
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
        expected = set(PLACEHOLDER.findall(entry.msgid)) | set(PLACEHOLDER.findall(entry.msgid_plural or ""))
        for text in translations:
            if set(PLACEHOLDER.findall(text)) != expected:
                mismatched.append((entry.msgid, text))
    assert mismatched == []


def test_placeholders_format(catalogue):
    """Each python-format msgstr accepts the same keyword arguments as its msgid."""
    for entry in catalogue:
        if "python-format" not in entry.flags:
            continue
        names = {name: 1 for name in re.findall(r"%\((\w+)\)", entry.msgid)}
        for text in [entry.msgstr] if not entry.msgid_plural else list(entry.msgstr_plural.values()):
            assert text % names


def test_django_uses_chinese(compiled):
    with translation.override("zh-hans"):
        assert translation.gettext("Stop") == "停止"
        assert translation.gettext("Thinking") == "思考过程"
        assert translation.gettext("Regenerate") == "重新生成"
        assert translation.gettext("Waiting in line: you are number %(position)s.") % {"position": 3} == (
            "排队中：你排在第 3 位。"
        )
    with translation.override("en"):
        assert translation.gettext("Stop") == "Stop"


def test_every_string_in_the_code_has_a_translation(tmp_path):
    """makemessages over a copy of the tree finds no string the catalogue lacks or has only fuzzily."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in tracked.splitlines():
        source = ROOT / name
        if source.is_file() and not name.startswith(("static/vendor/", "bench/")):
            target = tmp_path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    env = {"PATH": "/usr/bin:/bin", "QWENWEB_VAR_DIR": str(tmp_path / "var"), "DJANGO_SECRET_KEY": "x" * 50}
    subprocess.run(
        [sys.executable, "manage.py", "makemessages", "-l", "zh_Hans", "--ignore", "tests/*", "--ignore", "scripts/*"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
    )
    catalogue = polib.pofile(str(tmp_path / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"))
    live = [entry for entry in catalogue if not entry.obsolete]
    missing = [entry.msgid for entry in live if not entry.translated() or "fuzzy" in entry.flags]
    assert missing == []
