"""Forms at the border of the Nodes page and of the nodes' own calls (join, register, check).

What a node sends is checked field by field, its facts too (each GPU, each model file): it is shown
on a staff page, and a node is a box on the LAN, not the app.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.ipv6 import is_valid_ipv6_address
from django.utils.translation import gettext_lazy as _

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,47}$"
HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*")
MAX_GPUS = 64
MAX_MODELS = 500


class JoinTokenForm(forms.Form):
    note = forms.CharField(label=_("Note (which box it is for)"), max_length=200, required=False)
    hours = forms.IntegerField(
        label=_("Valid for (hours)"), min_value=1, max_value=24 * 30, initial=lambda: settings.NODE_TOKEN_HOURS
    )


class NodeCallForm(forms.Form):
    """The fields of a node's call: its name, and the address of its router (join and register)."""

    name = forms.RegexField(
        regex=NAME_PATTERN,
        max_length=48,
        error_messages={"invalid": _("A node's name is 1 to 48 lowercase letters, digits and hyphens.")},
    )
    url = forms.CharField(max_length=200, required=False)
    token = forms.CharField(max_length=200, required=False)

    def clean_url(self) -> str:
        """http(s)://HOST[:PORT] and nothing else: a bare LAN name (gpu-box), a name, an IPv4 or IPv6 address."""
        url = self.cleaned_data["url"]
        if not url:
            return url
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 (raises ValueError for a port that is no number)
        except ValueError:
            parts = None
        if (
            parts is None
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or not (HOST.fullmatch(parts.hostname) or is_valid_ipv6_address(parts.hostname))  # an IPv4 is a HOST
            or parts.username is not None
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
        ):
            raise ValidationError(_("Enter the router's address as http://HOST:PORT."))
        return f"{parts.scheme}://{parts.netloc}"


class GpuForm(forms.Form):
    index = forms.IntegerField(min_value=0, max_value=MAX_GPUS)
    name = forms.CharField(max_length=100)
    total_bytes = forms.IntegerField(min_value=0)


class ModelFileForm(forms.Form):
    name = forms.CharField(max_length=255)
    size = forms.IntegerField(min_value=0)
    sha256 = forms.RegexField(regex=r"^[0-9a-f]{64}$")

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if name.startswith("/") or ".." in name.split("/"):
            raise ValidationError(_("A model's name is a path inside the node's models folder."))
        return name


class NodeFactsForm(forms.Form):
    gpu_note = forms.CharField(max_length=300, required=False)
    ram_bytes = forms.IntegerField(min_value=0)
    cpu_cores = forms.IntegerField(min_value=1, max_value=65536)
    llama_server = forms.CharField(max_length=200, required=False)


def _items(raw: object, form_class: type[forms.Form], limit: int, what: str) -> list[dict]:
    if not isinstance(raw, list) or len(raw) > limit:
        raise ValidationError(_("%(what)s: a list of at most %(limit)d.") % {"what": what, "limit": limit})
    cleaned = []
    for item in raw:
        form = form_class(item if isinstance(item, dict) else {})
        if not form.is_valid():
            raise ValidationError(f"{what}: {first_error(form)}")
        cleaned.append(form.cleaned_data)
    return cleaned


def clean_facts(raw: object) -> dict:
    """A node's facts as it sent them, checked; ValidationError names the first thing wrong."""
    if not isinstance(raw, dict):
        raise ValidationError(_("facts: missing."))
    form = NodeFactsForm(raw)
    if not form.is_valid():
        raise ValidationError(f"facts: {first_error(form)}")
    return {
        **form.cleaned_data,
        "gpus": _items(raw.get("gpus", []), GpuForm, MAX_GPUS, "gpus"),
        "models": _items(raw.get("models", []), ModelFileForm, MAX_MODELS, "models"),
    }


def clean_call(payload: object, *, token: bool = False, facts: bool = True) -> tuple[dict, dict]:
    """(name, url and token; facts) of a node's call; ValidationError names the first thing wrong."""
    if not isinstance(payload, dict):
        raise ValidationError(_("The body is not a JSON object."))
    form = NodeCallForm({key: payload.get(key) for key in ("name", "url", "token") if payload.get(key) is not None})
    if not form.is_valid():
        raise ValidationError(first_error(form))
    if token and not form.cleaned_data["token"]:
        raise ValidationError(_("token: missing."))
    if facts and not form.cleaned_data["url"]:
        raise ValidationError(_("url: missing."))
    return form.cleaned_data, clean_facts(payload.get("facts")) if facts else {}


def first_error(form: forms.Form) -> str:
    field, errors = next(iter(form.errors.items()))
    return f"{field}: {errors[0]}" if field != "__all__" else str(errors[0])
