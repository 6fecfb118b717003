"""Django admin: downloads and the timeline, read-only. Profiles have their own staff pages (monitor/profiles/)."""

from django.contrib import admin

from monitor.models import DownloadJob, Event


@admin.register(DownloadJob)
class DownloadJobAdmin(admin.ModelAdmin):
    list_display = ("file_name", "status", "bytes_done", "created_at")
    readonly_fields = [field.name for field in DownloadJob._meta.fields]


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "kind", "level", "profile", "message")
    list_filter = ("kind", "level")
    readonly_fields = [field.name for field in Event._meta.fields]
