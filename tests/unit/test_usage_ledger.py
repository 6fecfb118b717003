"""The usage ledger against the database alone: rows and their daily rollup, the staff page and its CSV
(read back with the csv module, equal to the page's view, formula cells neutralized), retention, the
Prometheus counters per group and profile (no person in them), and who may see what. The rows that real
requests leave are checked in tests/integration/test_usage_ledger.py."""

from __future__ import annotations

import csv
import io
import json
import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from chat.api.keys import create_key
from chat.models import UsageDay, UsageDayTotal, UsageRecord
from chat.usage import selectors, services
from chat.usage.services import UsageEntry
from monitor.telemetry.prometheus import render
from tests.support.client import make_user


def model_name() -> str:
    return f"ledger-{uuid.uuid4().hex[:8]}"


def signed_in(user) -> Client:
    client = Client(SERVER_NAME="127.0.0.1")
    client.force_login(user)
    return client


def entry(user, model: str, **fields) -> UsageEntry:
    return UsageEntry(user_id=user.pk, kind=fields.pop("kind", "chat"), profile=model, node="box-a", **fields)


def table_rows(html: str) -> list[list[str]]:
    """The cells of the page's table body and footer, as text."""
    table = html.split('id="usage-table"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("</thead>", 1)[1], re.S)
    return [[re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<t[dh]>(.*?)</t[dh]>", row)] for row in rows]


def test_a_row_and_its_days_rollup_are_recorded_with_the_persons_primary_group():
    person, model = make_user(), model_name()
    beta, alpha = Group.objects.create(name=f"zz-{model}"), Group.objects.create(name=f"aa-{model}")
    person.groups.add(beta, alpha)
    services.record(entry(person, model, prompt_tokens=30, cached_tokens=10, output_tokens=5, duration_ms=12.4))
    services.record(entry(person, model, prompt_tokens=7, output_tokens=3, outcome="error"))
    rows = list(UsageRecord.objects.filter(profile=model).order_by("id"))
    assert [(row.user_id, row.group_id, row.prompt_tokens, row.cached_tokens, row.output_tokens) for row in rows] == [
        (person.pk, alpha.pk, 30, 10, 5),
        (person.pk, alpha.pk, 7, 0, 3),
    ]
    assert rows[0].duration_ms == 12 and rows[1].outcome == "error"
    day = UsageDay.objects.get(profile=model)
    assert (day.requests, day.errors, day.prompt_tokens, day.cached_tokens, day.output_tokens, day.group_id) == (
        2,
        1,
        37,
        10,
        8,
        alpha.pk,
    )
    # Values are per dimension: an API key's id can equal this person's or group's id, so ask for the pairs.
    wanted = {("person", str(person.pk)), ("group", str(alpha.pk)), ("model", model)}
    totals = {
        dimension: output
        for dimension, value, output in UsageDayTotal.objects.filter(value__in=[v for _d, v in wanted]).values_list(
            "dimension", "value", "output_tokens"
        )
        if (dimension, value) in wanted
    }
    assert totals == {"person": 8, "group": 8, "model": 8}


def test_a_view_of_days_alone_reads_the_same_figures_as_a_narrowed_one():
    """Narrowed by nothing but its days, a view reads the per-dimension totals; narrowed, the full rollup."""
    model, first, second = model_name(), make_user(), make_user()
    _key_row, _key = create_key(first, "agent")
    services.record(entry(first, model, prompt_tokens=30, cached_tokens=3, output_tokens=4, api_key_id=_key_row.pk))
    services.record(entry(second, model, prompt_tokens=20, output_tokens=2, outcome="error", queue_ms=8))
    today = timezone.localdate()
    whole = selectors.usage_view(selectors.ViewFilters(today, today, by="person"))
    for person in (first, second):
        [alone] = selectors.usage_view(selectors.ViewFilters(today, today, by="person", person=person.pk)).rows
        assert [row for row in whole.rows if row.value == person.pk] == [alone]
    by_model = selectors.usage_view(selectors.ViewFilters(today, today, by="model"))
    [row] = [row for row in by_model.rows if row.value == model]
    assert (row.requests, row.errors, row.prompt_tokens, row.cached_tokens, row.output_tokens, row.queue_ms) == (
        2,
        1,
        50,
        3,
        6,
        8,
    )


def test_the_csv_export_reads_back_as_the_pages_view_with_formula_cells_neutralized():
    model, staff = model_name(), make_user(is_staff=True)
    plain, hostile = make_user(), make_user(username=f"=HYPERLINK(1)-{uuid.uuid4().hex[:6]}")
    _row, _key = create_key(plain, "@SUM(A1)")
    for person, tokens in ((plain, 100), (hostile, 40), (plain, 60)):
        services.record(entry(person, model, prompt_tokens=tokens, output_tokens=tokens // 10, queue_ms=20))
    query = {"model": model, "by": "person"}
    page = signed_in(staff).get("/staff/usage/", query)
    assert page.status_code == 200
    shown = table_rows(page.content.decode())
    exported = signed_in(staff).get("/staff/usage.csv", query)
    assert exported.status_code == 200 and exported["Content-Type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert lines[0][0] == "Person"
    assert len(lines[1:]) == len(shown) == 3  # two people and the total
    hostile_cells = [line for line in lines if hostile.username in line[0]][0]
    assert hostile_cells[0] == "'" + hostile.username  # written as text, not a formula
    for line, cells in zip(lines[1:], shown, strict=True):
        assert line[0].removeprefix("'") == cells[0].replace("&#x27;", "'")
        assert line[1:] == cells[1:]
    assert lines[1][:6] == [plain.username, "2", "0", "160", "0", "16"]


def test_a_view_by_day_and_week_charts_every_bucket_of_its_days():
    model, staff, person = model_name(), make_user(is_staff=True), make_user()
    today = timezone.now()
    for days_ago in (0, 8, 15):
        services.record(entry(person, model, prompt_tokens=10, output_tokens=1, at=today - timedelta(days=days_ago)))
    start = (timezone.localdate() - timedelta(days=20)).isoformat()
    for bucket, points in (("day", 21), ("week", None)):
        page = signed_in(staff).get("/staff/usage/", {"model": model, "start": start, "bucket": bucket})
        chart = json.loads(re.search(r'id="usage-data"[^>]*>(.*?)</script>', page.content.decode(), re.S).group(1))
        assert sum(sum(series["values"]) for series in chart["series"]) == 33
        if points:
            assert len(chart["t"]) == points
        else:
            assert 3 <= len(chart["t"]) <= 4


def test_retention_deletes_rows_older_than_the_setting_in_batches():
    model, person = model_name(), make_user()
    now = timezone.now()
    for days_ago in (1, 40, 41, 42):
        services.record(entry(person, model, prompt_tokens=1, at=now - timedelta(days=days_ago)))
    assert services.delete_older_than(30, batch=2) >= 3
    assert list(UsageRecord.objects.filter(profile=model).values_list("prompt_tokens", flat=True)) == [1]
    assert UsageDay.objects.filter(profile=model).count() == 1
    assert services.delete_older_than(0) == 0  # 0: kept for ever


def test_prometheus_counts_per_group_and_profile_and_names_no_person():
    model, person = model_name(), make_user(username=f"secretname-{uuid.uuid4().hex[:6]}")
    group = Group.objects.create(name=f"analysts-{model}")
    person.groups.add(group)
    services.record(entry(person, model, prompt_tokens=11, output_tokens=4))
    services.record(entry(person, model, prompt_tokens=9, output_tokens=6))
    text = render().decode()
    assert f'qwenweb_usage_group_requests_total{{group="{group.name}"}} 2.0' in text
    assert f'qwenweb_usage_group_tokens_total{{group="{group.name}",type="prompt"}} 20.0' in text
    assert f'qwenweb_usage_profile_tokens_total{{profile="{model}",type="output"}} 10.0' in text
    assert "secretname" not in text and person.username not in text


def test_a_person_sees_only_their_own_usage_and_never_the_staff_page():
    model, person, other = model_name(), make_user(), make_user()
    services.record(entry(person, model, prompt_tokens=5, output_tokens=1))
    services.record(entry(other, model, prompt_tokens=500, output_tokens=100))
    client = signed_in(person)
    for path in ("/staff/usage/", "/staff/usage.csv"):
        assert client.get(path, {"person": other.pk}).status_code == 403
    assert Client(SERVER_NAME="127.0.0.1").get("/staff/usage/").status_code == 403
    own = client.get("/account/usage/", {"person": other.pk, "model": model, "by": "model"})
    assert own.status_code == 200
    assert [cells[:4] for cells in table_rows(own.content.decode())] == [
        [model, "1", "0", "5"],
        ["Total", "1", "0", "5"],
    ]
    assert other.username not in own.content.decode()
    exported = client.get("/account/usage.csv", {"person": other.pk, "model": model, "by": "model"})
    lines = list(csv.reader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert lines[1][:4] == [model, "1", "0", "5"]
    assert Client(SERVER_NAME="127.0.0.1").get("/account/usage/").status_code == 302  # to the login page


@pytest.mark.parametrize("query", [{"start": "2026-05-01", "end": "2026-01-01"}, {"by": "nothing"}])
def test_refused_filters_are_named(query):
    page = signed_in(make_user(is_staff=True)).get("/staff/usage/", query)
    assert page.status_code == 400
    assert 'id="usage-error"' in page.content.decode()
