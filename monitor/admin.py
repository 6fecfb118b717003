"""Admin pages for server profiles (Django's admin: staff only, forms validated at the border)."""

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import admin, messages
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from monitor.launch import llama_server_binary
from monitor.models import DownloadJob, ServerProfile
from monitor.profiles import profile_argv


def command_line(profile: ServerProfile) -> str:
    url = urlsplit(settings.LLAMA_SERVER_URL)
    try:
        binary = llama_server_binary()
    except FileNotFoundError:
        binary = "llama-server"
    return " ".join(profile_argv(profile, binary, host=url.hostname or "127.0.0.1", port=url.port or 8081))


@admin.register(ServerProfile)
class ServerProfileAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "model_file",
        "ctx_size",
        "gpu_layers",
        "parallel",
        "cache_type_k",
        "is_default",
        "available_to_users",
    )
    list_filter = ("available_to_users", "model_file")
    readonly_fields = ("exact_command_line",)
    actions = ["clone_profiles"]
    fieldsets = (
        (None, {"fields": ("name", "description", "model_file", "is_default", "available_to_users")}),
        (
            _("Memory"),
            {
                "fields": (
                    "ctx_size",
                    "gpu_layers",
                    "n_cpu_moe",
                    "cache_type_k",
                    "cache_type_v",
                    "flash_attn",
                    "parallel",
                )
            },
        ),
        (_("Throughput"), {"fields": ("batch_size", "ubatch_size", "threads")}),
        (_("Draft model and vision"), {"fields": ("draft_model_file", "draft_max", "draft_min", "mmproj_file")}),
        (_("Chat"), {"fields": ("reasoning", "reasoning_budget", "chat_template", "chat_template_jinja")}),
        (_("Sampling defaults"), {"fields": ("temperature", "top_p", "top_k", "min_p", "repeat_penalty")}),
        (_("Advanced"), {"fields": ("extra_args", "exact_command_line")}),
    )

    @admin.display(description=_("command line"))
    def exact_command_line(self, profile: ServerProfile) -> str:
        if not profile.pk:
            return "—"
        return format_html("<code style='white-space: pre-wrap'>{}</code>", command_line(profile))

    @admin.action(description=_("Clone the selected profiles"))
    def clone_profiles(self, request, queryset):
        for profile in queryset:
            base = f"{profile.name}-copy"
            name, n = base, 2
            while ServerProfile.objects.filter(name=name).exists():
                name, n = f"{base}-{n}", n + 1
            profile.pk, profile.name, profile.is_default = None, name, False
            profile.save()
        messages.success(request, _("Cloned."))


@admin.register(DownloadJob)
class DownloadJobAdmin(admin.ModelAdmin):
    list_display = ("file_name", "status", "bytes_done", "created_at")
    readonly_fields = [field.name for field in DownloadJob._meta.fields]
