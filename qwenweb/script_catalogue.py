"""The one way translated strings reach the page scripts: Django's JavaScriptCatalog, served by the app.

The scripts call ``gettext()``, ``ngettext()`` and ``interpolate()``; their strings live in the
``djangojs`` domain (``locale/zh_Hans/LC_MESSAGES/djangojs.po``). A plain script URL, so the policy's
``script-src 'self'`` holds. The language is part of the URL, so a browser's cached English catalogue
is never revalidated as the Chinese one; the catalogue changes only when the app restarts (new .mo
files), which ``Last-Modified`` says, and ``no-cache`` makes the browser ask (a 304 costs nothing).
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone, translation
from django.utils.decorators import method_decorator
from django.views.decorators.cache import cache_control
from django.views.decorators.http import last_modified
from django.views.i18n import JavaScriptCatalog

STARTED = timezone.now()


@method_decorator(cache_control(no_cache=True), name="get")
@method_decorator(last_modified(lambda request, language: STARTED), name="get")
class ScriptCatalogue(JavaScriptCatalog):
    """Only our own strings (LOCALE_PATHS, always read), not every installed app's."""

    packages = ["chat", "monitor"]

    def get(self, request: HttpRequest, language: str) -> HttpResponse:
        if language not in dict(settings.LANGUAGES):
            raise Http404(language)
        with translation.override(language):
            return super().get(request)
