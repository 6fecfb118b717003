"""The staff page's forms: a server (name, address, headers) and one tool's settings, checked here."""

from __future__ import annotations

import re

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from chat.tools.mcp.addresses import URL_MAX_CHARS
from chat.tools.mcp.services import ServerValues, ToolValues

HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
HEADER_VALUE_MAX_CHARS = 4096
HEADERS_MAX = 20
# Set by the MCP transport itself: a header of these names from staff would break or spoof it.
RESERVED_HEADERS = {
    "host",
    "content-length",
    "content-type",
    "accept",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
}


def parse_headers(text: str) -> dict[str, str]:
    """``Name: value`` lines (empty lines skipped); raises ValidationError naming the line at fault."""
    headers: dict[str, str] = {}
    # Lines end at a newline only: any other control character (which splitlines would take for a line's
    # end) is refused in a value, never a way to smuggle a second header in.
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not HEADER_NAME.match(name) or not value or len(value) > HEADER_VALUE_MAX_CHARS:
            raise ValidationError(_("Header line %(number)d is not of the form Name: value.") % {"number": number})
        if any(ord(char) < 32 or ord(char) == 127 for char in value):
            raise ValidationError(_("Header line %(number)d is not of the form Name: value.") % {"number": number})
        if name.lower() in RESERVED_HEADERS:
            raise ValidationError(_("The header %(name)s is set by the MCP client itself.") % {"name": name})
        headers[name] = value
    if len(headers) > HEADERS_MAX:
        raise ValidationError(_("Too many headers (the most is %(count)d).") % {"count": HEADERS_MAX})
    return headers


class ServerForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), max_length=100)
    url = forms.CharField(label=gettext_lazy("Address (URL)"), max_length=URL_MAX_CHARS)
    enabled = forms.BooleanField(label=gettext_lazy("Enabled"), required=False, initial=True)
    # Never filled in when the page is shown: values already set appear as "set" only.
    headers = forms.CharField(label=gettext_lazy("Headers to add or replace"), required=False, widget=forms.Textarea)
    remove_headers = forms.MultipleChoiceField(required=False, choices=())

    def __init__(self, *args, header_names: list[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["remove_headers"].choices = [(name, name) for name in header_names]

    def clean_headers(self) -> dict[str, str]:
        return parse_headers(self.cleaned_data.get("headers", ""))

    def values(self) -> ServerValues:
        data = self.cleaned_data
        return ServerValues(data["name"], data["url"], data["enabled"], data["headers"], data["remove_headers"])


class ToolForm(forms.Form):
    enabled = forms.BooleanField(required=False)
    writes = forms.TypedChoiceField(choices=(("1", "writes"), ("0", "reads")), coerce=lambda value: value == "1")
    users = forms.TypedMultipleChoiceField(required=False, coerce=int, choices=())
    groups = forms.TypedMultipleChoiceField(required=False, coerce=int, choices=())

    def __init__(self, *args, people: list[tuple[int, str]] = (), groups: list[tuple[int, str]] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["users"].choices = [(str(pk), name) for pk, name in people]
        self.fields["groups"].choices = [(str(pk), name) for pk, name in groups]

    def values(self) -> ToolValues:
        data = self.cleaned_data
        return ToolValues(data["enabled"], data["writes"], data["users"], data["groups"])
