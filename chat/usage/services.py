"""Writes to the ledger: ``record`` (a row and its day's two rollups, on the caller's database
connection: the paths that count usage call it inside the hop they already make) and
``delete_older_than`` (retention, in batches).

The row keeps the person's primary group at the time (the first of their groups by name).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from chat.usage.models import UsageDay, UsageDayTotal, UsageKind, UsageOutcome, UsageRecord

_RECORD = UsageRecord._meta.db_table
_DAY = UsageDay._meta.db_table
_TOTAL = UsageDayTotal._meta.db_table
_PRIMARY_GROUP = (
    "SELECT g.id FROM auth_user_groups ug JOIN auth_group g ON g.id = ug.group_id"
    " WHERE ug.user_id = %s ORDER BY g.name, g.id LIMIT 1"
)
_INSERT = (
    f"INSERT INTO {_RECORD} (at, user_id, api_key_id, group_id, kind, profile, node, prompt_tokens,"
    " cached_tokens, output_tokens, queue_ms, duration_ms, outcome)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_SUMS = ("requests", "errors", "prompt_tokens", "cached_tokens", "output_tokens", "queue_ms", "duration_ms")
_ADDED = " DO UPDATE SET " + ", ".join(f"{name} = {{table}}.{name} + excluded.{name}" for name in _SUMS)
_UPSERT_DAY = (
    f"INSERT INTO {_DAY} (day, user_id, group_id, api_key_id, kind, profile, node, {', '.join(_SUMS)})"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, 1, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (day, user_id, group_id, api_key_id, kind, profile, node)" + _ADDED.format(table=_DAY)
)
TOTAL_DIMENSIONS = ("person", "group", "key", "model", "node", "kind")
_UPSERT_TOTALS = (
    f"INSERT INTO {_TOTAL} (day, dimension, value, {', '.join(_SUMS)}) VALUES "
    + ", ".join(["(%s, %s, %s, 1, %s, %s, %s, %s, %s, %s)"] * len(TOTAL_DIMENSIONS))
    + " ON CONFLICT (dimension, day, value)"
    + _ADDED.format(table=_TOTAL)
)
# Outcomes counted as errors in the rollup (a person's Stop is not one).
_FAILED = {UsageOutcome.ERROR, UsageOutcome.INCOMPLETE}
DELETE_BATCH = 5000


@dataclass
class UsageEntry:
    """One row to record. Times in milliseconds; ``prompt_tokens`` is the whole prompt, cached part included."""

    user_id: int
    kind: str
    profile: str = ""
    node: str = ""
    api_key_id: int | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    queue_ms: float = 0.0
    duration_ms: float = 0.0
    outcome: str = UsageOutcome.OK
    at: datetime = field(default_factory=timezone.now)


def served_times(asked_at: float, granted_at: float) -> tuple[float, float]:
    """(queue wait, time served so far) in ms from a serving slot's ``asked_at`` and ``granted_at``."""
    if not granted_at:
        return 0.0, 0.0
    return (granted_at - asked_at) * 1000, (time.monotonic() - granted_at) * 1000


def _whole(value) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0


def record(entry: UsageEntry) -> None:
    """The entry's row and its day's rollups, in one transaction (the caller's, when it has one): the
    person's primary group read, the row inserted, the two rollups upserted (four statements)."""
    ops = connection.ops
    sums = [_whole(entry.prompt_tokens), _whole(entry.cached_tokens), _whole(entry.output_tokens)]
    sums += [_whole(round(entry.queue_ms)), _whole(round(entry.duration_ms))]
    kind, profile, node = entry.kind or UsageKind.CHAT, entry.profile[:100], entry.node[:100]
    day = ops.adapt_datefield_value(timezone.localdate(entry.at))
    failed = int(entry.outcome in _FAILED)
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(_PRIMARY_GROUP, [entry.user_id])
        found = cursor.fetchone()
        group_id = found[0] if found else None
        cursor.execute(
            _INSERT,
            [ops.adapt_datetimefield_value(entry.at), entry.user_id, entry.api_key_id, group_id, kind, profile, node]
            + sums
            + [entry.outcome],
        )
        cursor.execute(
            _UPSERT_DAY, [day, entry.user_id, group_id or 0, entry.api_key_id or 0, kind, profile, node, failed] + sums
        )
        values = (entry.user_id, group_id or 0, entry.api_key_id or 0, profile, node, kind)
        cursor.execute(
            _UPSERT_TOTALS,
            [
                part
                for dimension, value in zip(TOTAL_DIMENSIONS, values, strict=True)
                for part in (day, dimension, str(value), failed, *sums)
            ],
        )


def delete_older_than(days: int, batch: int = DELETE_BATCH) -> int:
    """Rows (and rollup days) older than ``days`` deleted, ``batch`` rows a transaction so a writer is
    never held long; returns how many rows went. ``days`` 0: keep everything."""
    if days <= 0:
        return 0
    cutoff = timezone.now() - timedelta(days=days)
    deleted = 0
    while True:
        ids = list(UsageRecord.objects.filter(at__lt=cutoff).order_by("at").values_list("id", flat=True)[:batch])
        if not ids:
            break
        deleted += UsageRecord.objects.filter(id__in=ids).delete()[0]
    first_day_kept = timezone.localdate(cutoff)
    for rollup in (UsageDay, UsageDayTotal):
        while ids := list(rollup.objects.filter(day__lt=first_day_kept).values_list("id", flat=True)[:batch]):
            rollup.objects.filter(id__in=ids).delete()
    return deleted
