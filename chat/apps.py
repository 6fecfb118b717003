from django.apps import AppConfig
from django.core import checks


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The dashboard (monitor) shows chat's request figures without importing chat.
        # Imported here, not at the top: they need the app registry, which is ready only now.
        from chat.conversations.stats import request_figures
        from monitor.public import register_request_figures

        register_request_figures(request_figures)
        # Likewise /metrics gains the usage ledger's counters per group and per profile.
        from chat.usage.metrics import UsageCollector
        from monitor.public import register_metrics_collector

        register_metrics_collector(UsageCollector())
        # The directory (LDAP) and the OIDC provider asked once at start-up: a readable warning rather
        # than a login that hangs.
        from chat.accounts.directory_check import check_directory
        from chat.accounts.oidc_check import check_oidc

        checks.register(check_directory)
        checks.register(check_oidc)
        # The MCP servers' and knowledge bases' rows live beside their code (chat/models.py is at the line cap).
        import chat.knowledge.models  # noqa: F401
        import chat.tools.mcp.models  # noqa: F401
