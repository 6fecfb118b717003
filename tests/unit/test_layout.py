"""The layout a newcomer reads: the README is a short map that matches the tree both ways, every package
says what it owns, every setting is documented, files stay small."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES_UNDER = ("monitor", "chat", "qwenweb")
MAX_LINES = 400
README_MAX_LINES = 300


def readme() -> str:
    return (ROOT / "README.md").read_text()


def readme_map() -> str:
    return readme().split("## Where things live", 1)[1].split("\n## ", 1)[0]


def packages() -> list[Path]:
    """Every package of the product, nested ones too (migrations and command folders aside)."""
    return sorted(
        init.parent
        for top in PACKAGES_UNDER
        for init in (ROOT / top).rglob("__init__.py")
        if init.parent != ROOT / top and not {"migrations", "commands", "__pycache__"} & set(init.parent.parts)
    )


def test_the_readme_is_a_short_map_that_starts_with_the_two_commands():
    text = readme()
    assert len(text.splitlines()) <= README_MAX_LINES
    commands = re.search(r"```sh\n(.*?)```", text, re.S).group(1).splitlines()
    assert [line.split()[:2] for line in commands] == [["make", "run"], ["make", "test"]]


def test_every_package_is_on_the_map_with_a_docstring():
    section = readme_map()
    for package in packages():
        assert f"`{package.name}/`" in section, f"{package.relative_to(ROOT)} is not in the README's map"
        docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
        assert docstring, f"{package.relative_to(ROOT)} does not say what it owns"


def test_everything_the_map_names_exists():
    section = readme_map()
    files = {path.name for path in ROOT.glob("*/**/*") if ".venv" not in path.parts and path.is_file()}
    folders = {path.name for path in ROOT.glob("*/**/") if ".venv" not in path.parts} | {
        path.name for path in ROOT.iterdir() if path.is_dir()
    }
    named_files = set(re.findall(r"`([\w./-]+\.(?:py|lua|po|md|toml|txt|in))`", section))
    named_folders = set(re.findall(r"`([\w-]+)/`", section))
    missing = sorted(name for name in named_files if Path(name).name not in files and not (ROOT / name).is_file())
    missing += sorted(f"{name}/" for name in named_folders if name not in folders)
    assert not missing, f"the README's map names what does not exist: {missing}"


def test_every_page_the_readme_links_exists():
    missing = [link for link in re.findall(r"\]\(([^)#]+)", readme()) if not (ROOT / link).exists()]
    assert not missing, missing


def test_every_setting_is_documented():
    """Each environment variable the settings read is named in the README or a page of docs/."""
    sources = "".join(path.read_text() for path in (ROOT / "qwenweb").glob("*settings.py"))
    names = set(re.findall(r"""(?:environ\.get|env_int|env_bool|env_list)\(\s*["']([A-Z][A-Z0-9_]+)""", sources))
    documented = readme() + "".join(page.read_text() for page in (ROOT / "docs").glob("*.md"))
    missing = sorted(name for name in names if name not in documented)
    assert not missing, f"settings named nowhere in the README or docs/: {missing}"


def test_no_product_file_is_over_the_limit():
    long = [
        f"{path.relative_to(ROOT)} ({count} lines)"
        for top in PACKAGES_UNDER
        for path in (ROOT / top).rglob("*.py")
        if "migrations" not in path.parts and (count := len(path.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, long
