from django.apps import AppConfig


class MonitorConfig(AppConfig):
    name = "monitor"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top: it needs the app registry, which is ready only now.
        from monitor.nodes.registry import watch_placements

        watch_placements()
