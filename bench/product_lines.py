"""Prints ``product_lines=``: the lines of the product's Python (monitor/, chat/, qwenweb/), migrations
left out, every line counted (issue 48's measure: fewer for the same figures), and the same split into
``product_lines_features=`` (the round's new features, issues 49-52: whole folders and files that exist
only for them) and ``product_lines_base=`` (everything else, against 22,220 at the round's start,
d4991eb). Lines the new features added to files that existed before count in the base."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("monitor", "chat", "qwenweb")
# Issue 49 (knowledge, and the embeddings' change to llama.cpp), 50 (groups, directory login, ledger), 51
# (tools), 52 (answers resumed, the web process's freed heap given back).
FEATURES = (
    "chat/knowledge/",
    "chat/tools/",
    "chat/usage/",
    "chat/accounts/directory.py",
    "chat/accounts/directory_check.py",
    "chat/accounts/directory_tasks.py",
    "chat/accounts/external.py",
    "chat/accounts/groups.py",
    "chat/accounts/oidc.py",
    "chat/accounts/oidc_check.py",
    "chat/accounts/oidc_provider.py",
    "chat/accounts/profiles.py",
    "chat/conversations/heap.py",
    "chat/conversations/resume.py",
    "chat/web/knowledge_forms.py",
    "chat/web/knowledge_views.py",
    "chat/web/mcp_views.py",
    "chat/web/oidc_views.py",
    "chat/web/usage_views.py",
    "monitor/catalog/known_models.py",
    "qwenweb/knowledge_settings.py",
    "qwenweb/ldap_settings.py",
    "qwenweb/oidc_settings.py",
    "qwenweb/patches/llama_embeddings.py",
    "qwenweb/tool_settings.py",
)


def counted() -> dict[str, int]:
    """Lines per product file (relative path), migrations left out."""
    files = (path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    return {
        path.relative_to(ROOT).as_posix(): len(path.read_bytes().splitlines())
        for path in files
        if "migrations" not in path.parts
    }


def product_lines() -> int:
    return sum(counted().values())


if __name__ == "__main__":
    lines = counted()
    features = sum(n for name, n in lines.items() if name.startswith(FEATURES))
    total = sum(lines.values())
    print(f"product_lines={total}", flush=True)
    print(f"product_lines_features={features} product_lines_base={total - features} (round start 22220)", flush=True)
