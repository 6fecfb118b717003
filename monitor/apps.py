from django.apps import AppConfig


class MonitorConfig(AppConfig):
    name = "monitor"
    default_auto_field = "django.db.models.BigAutoField"
