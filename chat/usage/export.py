"""A usage view as CSV, streamed row by row. A cell a spreadsheet would read as a formula (one that
starts with = + - @, a tab or a carriage return: a name, a key's name or a node's can be anything) is
written with a leading apostrophe, as OWASP advises against CSV injection."""

from __future__ import annotations

import csv
from collections.abc import Iterator

from django.utils.translation import gettext as _

from chat.usage.selectors import DIMENSION_NAMES, UsageView

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutral(cell) -> str:
    """The cell as text a spreadsheet shows as text."""
    text = "" if cell is None else str(cell)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


class _Echo:
    def write(self, value: str) -> str:
        return value


def header(view: UsageView) -> list[str]:
    return [
        str(DIMENSION_NAMES.get(view.filters.by, view.filters.by)),
        _("Requests"),
        _("Errors"),
        _("Prompt tokens"),
        _("Cached tokens"),
        _("Output tokens"),
        _("Mean queue wait (ms)"),
        _("Mean duration (ms)"),
    ]


def cells(row) -> list:
    return [
        row.label,
        row.requests,
        row.errors,
        row.prompt_tokens,
        row.cached_tokens,
        row.output_tokens,
        row.mean_queue_ms,
        row.mean_duration_ms,
    ]


def csv_lines(view: UsageView) -> Iterator[str]:
    """The view's table, a line at a time: its header, a row per value, the total."""
    writer = csv.writer(_Echo())
    yield writer.writerow([neutral(cell) for cell in header(view)])
    for row in [*view.rows, view.total]:
        yield writer.writerow([neutral(cell) for cell in cells(row)])
