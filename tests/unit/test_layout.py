"""The layout a newcomer reads: the README's map matches the tree, packages say what they own, files stay small."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("monitor", "chat")
MAX_LINES = 400
# Modules the README's map still names by their name before a split, and where their code went. The
# map is rewritten apart from the code: an entry goes when the map names the new modules.
SPLIT_MODULES = {
    "summaries.py": (
        "chat/documents/summary_run.py",
        "chat/documents/final_summary.py",
        "chat/documents/pipeline.py",
        "chat/documents/services.py",
    ),
}


def readme_map() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Where things live", 1)[1].split("\n## ", 1)[0]


def sub_packages() -> list[Path]:
    return [
        init.parent
        for app in APPS
        for init in (ROOT / app).glob("*/__init__.py")
        if init.parent.name not in ("migrations", "management")
    ]


def test_every_sub_package_is_on_the_map_with_a_docstring():
    section = readme_map()
    for package in sub_packages():
        assert f"`{package.name}/`" in section, f"{package.relative_to(ROOT)} is not in the README's map"
        docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
        assert docstring, f"{package.relative_to(ROOT)} does not say what it owns"


def test_every_module_the_map_names_exists():
    names = set(re.findall(r"`([\w/]+\.py)`", readme_map()))
    tree = {path.name for path in ROOT.glob("*/**/*.py")} | {
        str(path.relative_to(ROOT)) for path in ROOT.glob("*/**/*.py")
    }
    split = {name for name, parts in SPLIT_MODULES.items() if all((ROOT / part).is_file() for part in parts)}
    missing = sorted(name for name in names - split if name not in tree and Path(name).name not in tree)
    assert not missing, f"the README's map names files that do not exist: {missing}"


def test_no_product_file_is_over_the_limit():
    long = [
        f"{path.relative_to(ROOT)} ({count} lines)"
        for app in (*APPS, "qwenweb")
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts and (count := len(path.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, long
