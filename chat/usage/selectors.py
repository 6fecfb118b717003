"""Reads of the ledger: a view (one dimension, filters, days or weeks) as the staff page, a person's own
page and the CSV export show it, and the totals per group and per profile for Prometheus.

Every view is computed from the daily rollups, never the raw rows: a view narrowed by nothing but its
days reads ``UsageDayTotal`` (days × values rows), a narrowed one ``UsageDay``, grouped by the dimension
and the day.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from chat.usage.models import UsageDay, UsageDayTotal, UsageKind, UsageRecord

# chat.models imports this package's models: the key's model is reached through the ledger's own relation.
_API_KEY = UsageRecord._meta.get_field("api_key").related_model

# The dimensions a view groups by: their rollup column.
DIMENSIONS = {
    "person": "user_id",
    "group": "group_id",
    "key": "api_key_id",
    "model": "profile",
    "node": "node",
    "kind": "kind",
}
DIMENSION_NAMES = {
    "person": gettext_lazy("Person"),
    "group": gettext_lazy("Group"),
    "key": gettext_lazy("API key"),
    "model": gettext_lazy("Model"),
    "node": gettext_lazy("Node"),
    "kind": gettext_lazy("Kind"),
}
NUMERIC = {"person", "group", "key"}  # dimensions whose values are ids (kept as text in UsageDayTotal)
FIGURES = ("requests", "errors", "prompt_tokens", "cached_tokens", "output_tokens", "queue_ms", "duration_ms")
CHART_SERIES = 8  # the biggest values charted one by one; the rest as one series


@dataclass(frozen=True)
class ViewFilters:
    """What a view shows: the days ``start``..``end`` (server time, both included), grouped by ``by``, in
    ``bucket``s of a day or a week, narrowed to the values given (None: every one)."""

    start: date
    end: date
    by: str = "person"
    bucket: str = "day"
    person: int | None = None
    group: int | None = None
    key: int | None = None
    model: str | None = None
    node: str | None = None
    kind: str | None = None


@dataclass
class ViewRow:
    value: str | int
    label: str
    requests: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    queue_ms: int = 0
    duration_ms: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    @property
    def mean_queue_ms(self) -> int:
        return round(self.queue_ms / self.requests) if self.requests else 0

    @property
    def mean_duration_ms(self) -> int:
        return round(self.duration_ms / self.requests) if self.requests else 0


@dataclass
class UsageView:
    filters: ViewFilters
    rows: list[ViewRow]  # one per value of the dimension, most tokens first
    chart: dict = field(default_factory=dict)  # uPlot's data: bucket starts (epoch s), a series per value

    @property
    def total(self) -> ViewRow:
        total = ViewRow("", _("Total"))
        for row in self.rows:
            for name in FIGURES:
                setattr(total, name, getattr(total, name) + getattr(row, name))
        return total


def _bucket_of(day: date, bucket: str) -> date:
    return day - timedelta(days=day.weekday()) if bucket == "week" else day


def _buckets(filters: ViewFilters) -> list[date]:
    first, step = _bucket_of(filters.start, filters.bucket), 7 if filters.bucket == "week" else 1
    count = (filters.end - first).days // step + 1
    return [first + timedelta(days=step * index) for index in range(count)]


def _narrowing(filters: ViewFilters) -> dict:
    narrowed = {
        "user_id": filters.person,
        "group_id": filters.group,
        "api_key_id": filters.key,
        "profile": filters.model,
        "node": filters.node,
        "kind": filters.kind,
    }
    return {name: value for name, value in narrowed.items() if value is not None}


def _grouped(filters: ViewFilters):
    """(value, day, *FIGURES) per value of the dimension and day: from the per-dimension totals when the view
    is narrowed by nothing but its days, else from the rollup of every dimension, narrowed."""
    days = {"day__gte": filters.start, "day__lte": filters.end}
    narrowed = _narrowing(filters)
    if not narrowed:
        rows = UsageDayTotal.objects.filter(dimension=filters.by, **days).values_list("value", "day", *FIGURES)
        numeric = filters.by in NUMERIC
        return ((int(value) if numeric else value, day, *sums) for value, day, *sums in rows)
    column = DIMENSIONS[filters.by]
    return (
        UsageDay.objects.filter(**days, **narrowed)
        .values_list(column, "day")
        .order_by()
        .annotate(*(Sum(name) for name in FIGURES))
    )


def usage_view(filters: ViewFilters) -> UsageView:
    """The view: totals per value of the dimension, and the tokens per bucket of the biggest values."""
    totals: dict = {}
    per_bucket: dict = defaultdict(lambda: defaultdict(int))
    for value, day, *sums in _grouped(filters):
        row = totals.get(value) or totals.setdefault(value, ViewRow(value, ""))
        for name, amount in zip(FIGURES, sums, strict=True):
            setattr(row, name, getattr(row, name) + (amount or 0))
        per_bucket[value][_bucket_of(day, filters.bucket)] += (sums[2] or 0) + (sums[4] or 0)
    labels = labels_of(filters.by, list(totals))
    rows = sorted(totals.values(), key=lambda row: (-row.tokens, str(row.value)))
    for row in rows:
        row.label = labels.get(row.value, str(row.value))
    return UsageView(filters, rows, _chart(filters, rows, per_bucket))


def _chart(filters: ViewFilters, rows: list[ViewRow], per_bucket: dict) -> dict:
    buckets = _buckets(filters)
    shown, rest = rows[:CHART_SERIES], rows[CHART_SERIES:]
    series = [{"label": row.label, "values": [per_bucket[row.value].get(b, 0) for b in buckets]} for row in shown]
    if rest:
        others = [sum(per_bucket[row.value].get(b, 0) for row in rest) for b in buckets]
        series.append({"label": _("Others"), "values": others})
    zone = timezone.get_current_timezone()
    starts = [int(datetime.combine(b, time(), tzinfo=zone).timestamp()) for b in buckets]
    return {"t": starts, "series": series, "bucket": filters.bucket}


def labels_of(by: str, values: list) -> dict:
    """What the page calls each value of a dimension (people by login name, keys by name and id)."""
    if by == "person":
        return dict(get_user_model().objects.filter(pk__in=values).values_list("pk", "username"))
    if by == "group":
        names = dict(Group.objects.filter(pk__in=values).values_list("pk", "name"))
        return {value: names.get(value) or (_("(no group)") if not value else f"#{value}") for value in values}
    if by == "key":
        keys = {
            row["pk"]: f"{row['name']} (qw-{row['prefix']}…, {row['owner__username']})"
            for row in _API_KEY.objects.filter(pk__in=values).values("pk", "name", "prefix", "owner__username")
        }
        return {value: keys.get(value) or (_("(no key)") if not value else f"#{value}") for value in values}
    if by == "kind":
        return {value: str(UsageKind(value).label) if value in UsageKind.values else value for value in values}
    return {value: value or _("(none)") for value in values}


def choices(filters: ViewFilters) -> dict[str, list[tuple]]:
    """The values each filter offers over the view's days (what the ledger holds there)."""
    days = UsageDayTotal.objects.filter(day__gte=filters.start, day__lte=filters.end)
    held: dict[str, set] = defaultdict(set)
    for dimension, value in days.values_list("dimension", "value").order_by().distinct():
        held[dimension].add(int(value) if dimension in NUMERIC else value)
    offered = {}
    for by in ("person", "group", "key", "model", "node"):
        labels = labels_of(by, list(held[by]))
        offered[by] = sorted(((value, labels.get(value, str(value))) for value in held[by]), key=lambda pair: pair[1])
    return offered


def totals_by(dimension: str) -> dict:
    """(requests, prompt tokens, output tokens) over the whole ledger per value of ``dimension`` (``group``:
    group ids, 0 for none; ``model``: profile names)."""
    rows = (
        UsageDayTotal.objects.filter(dimension=dimension)
        .values_list("value")
        .order_by()
        .annotate(Sum("requests"), Sum("prompt_tokens"), Sum("output_tokens"))
    )
    return {int(value) if dimension in NUMERIC else value: sums for value, *sums in rows}
