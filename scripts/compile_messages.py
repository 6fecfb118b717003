"""Compile locale/*/LC_MESSAGES/*.po to .mo with polib (no gettext tools needed): both catalogues,
django.po (templates and Python) and djangojs.po (the page scripts, served by the JavaScript catalogue)."""

from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parent.parent

for po_path in (ROOT / "locale").glob("*/LC_MESSAGES/*.po"):
    mo_path = po_path.with_suffix(".mo")
    if not mo_path.exists() or mo_path.stat().st_mtime < po_path.stat().st_mtime:
        polib.pofile(str(po_path)).save_as_mofile(str(mo_path))
