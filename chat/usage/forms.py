"""The usage page's filters, checked at the border: the days, the dimension, days or weeks, and the
values to narrow to. A person's own page offers fewer dimensions and no person or group filter."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from chat.usage.models import UsageKind
from chat.usage.selectors import DIMENSION_NAMES, ViewFilters

DEFAULT_DAYS = 30
MAX_DAYS = 400
STAFF_DIMENSIONS = list(DIMENSION_NAMES.items())
OWN_DIMENSIONS = [(name, DIMENSION_NAMES[name]) for name in ("model", "key", "kind")]


class UsageFilterForm(forms.Form):
    start = forms.DateField(required=False, label=_("First day"))
    end = forms.DateField(required=False, label=_("Last day"))
    by = forms.ChoiceField(choices=STAFF_DIMENSIONS, required=False, label=_("By"))
    bucket = forms.ChoiceField(choices=[("day", _("Days")), ("week", _("Weeks"))], required=False, label=_("Over"))
    person = forms.IntegerField(required=False, min_value=1)
    group = forms.IntegerField(required=False, min_value=0)
    key = forms.IntegerField(required=False, min_value=0)
    model = forms.CharField(required=False, max_length=100)
    node = forms.CharField(required=False, max_length=100)
    kind = forms.ChoiceField(choices=[("", "")] + UsageKind.choices, required=False)

    def __init__(self, data=None, *, own: bool = False):
        super().__init__(data)
        self.own = own
        if own:
            self.fields["by"].choices = OWN_DIMENSIONS

    def clean(self) -> dict:
        data = super().clean()
        today = timezone.localdate()
        end = data.get("end") or today
        start = data.get("start") or end - timedelta(days=DEFAULT_DAYS - 1)
        if start > end:
            raise ValidationError(_("The first day comes after the last one."))
        if (end - start).days >= MAX_DAYS:
            raise ValidationError(
                ngettext("Choose at most %(days)d day.", "Choose at most %(days)d days.", MAX_DAYS) % {"days": MAX_DAYS}
            )
        data["start"], data["end"] = start, end
        return data

    def filters(self, person: int | None = None) -> ViewFilters:
        """The view asked for; ``person``: the one person whose usage it may show (a person's own page)."""
        data = self.cleaned_data
        narrowed = {name: data.get(name) if data.get(name) not in ("", None) else None for name in _NARROWING}
        if self.own:
            narrowed.update(person=person, group=None, node=None)
        return ViewFilters(
            start=data["start"],
            end=data["end"],
            by=data.get("by") or self.fields["by"].choices[0][0],
            bucket=data.get("bucket") or "day",
            **narrowed,
        )


_NARROWING = ("person", "group", "key", "model", "node", "kind")
