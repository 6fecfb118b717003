"""The usage ledger's two costs: what recording a request costs the web process, and the staff page over a
big ledger.

- ``ledger_cpu_ms_per_request=``: the process CPU (``time.process_time``, SQLite's work included: it runs
  in this process) of ``chat.usage.services.record`` (a row and its day's rollup, one transaction), the
  mean over many calls, for a person in a group and with a key. Goal under 1 ms.
- ``ledger_page_ms=``: the staff usage page (by person, by day, over the 90 days) through Django's test
  client, over 1,000,000 ledger rows (90 days, 50 people in 5 groups, keys, 4 profiles, 3 nodes) generated
  into a SQLite database in a temporary folder, with their daily rollup; the median of several loads after
  one to warm up. Goal <= 500.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

RECORD_CALLS = 3000
ROWS = 1_000_000
DAYS = 90
PEOPLE = 50
LOADS = 7
KINDS = [("chat", 0.6), ("api-chat", 0.25), ("api-embedding", 0.1), ("document", 0.05)]
CHAT_PROFILES = ["chat-8k", "chat-32k", "qwen-128k"]
NODES = ["box-a", "box-b", "box-c"]
SUMS = ("requests", "errors", "prompt_tokens", "cached_tokens", "output_tokens", "queue_ms", "duration_ms")


def record_cost_ms(person, key_id: int) -> float:
    from chat.usage import services
    from chat.usage.services import UsageEntry

    def entry() -> UsageEntry:
        return UsageEntry(
            user_id=person.pk,
            api_key_id=key_id,
            kind="api-chat",
            profile="chat-8k",
            node="box-a",
            prompt_tokens=812,
            cached_tokens=600,
            output_tokens=230,
            queue_ms=3.2,
            duration_ms=1830.5,
        )

    for _ in range(100):  # warm-up: statements prepared, pages cached
        services.record(entry())
    started = time.process_time()
    for _ in range(RECORD_CALLS):
        services.record(entry())
    return (time.process_time() - started) * 1000 / RECORD_CALLS


def fill_ledger(people: list, groups: dict, keys: dict) -> None:
    """ROWS rows over DAYS days, and their rollup as the product's own write would have kept it."""
    from django.db import connection, transaction

    from chat.models import UsageDay, UsageDayTotal, UsageRecord

    rng = random.Random(50)
    now = datetime.now(timezone.utc).replace(microsecond=0)
    kinds, weights = zip(*KINDS, strict=True)
    rollup: dict[tuple, list[int]] = defaultdict(lambda: [0] * 7)
    totals: dict[tuple, list[int]] = defaultdict(lambda: [0] * 7)
    batch: list[tuple] = []
    insert = (
        f"INSERT INTO {UsageRecord._meta.db_table} (at, user_id, api_key_id, group_id, kind, profile, node,"
        " prompt_tokens, cached_tokens, output_tokens, queue_ms, duration_ms, outcome)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        for index in range(ROWS):
            at = now - timedelta(seconds=rng.randrange(DAYS * 86400))
            person = people[rng.randrange(PEOPLE)]
            kind = rng.choices(kinds, weights)[0]
            profile = "embed-2k" if kind == "api-embedding" else rng.choice(CHAT_PROFILES)
            node, key = rng.choice(NODES), keys[person] if kind.startswith("api") else None
            prompt, output = rng.randrange(20, 4000), 0 if kind == "api-embedding" else rng.randrange(1, 800)
            cached, queue, duration = rng.randrange(prompt), rng.randrange(0, 500), rng.randrange(50, 20000)
            outcome = "error" if rng.random() < 0.01 else "ok"
            batch.append(
                (at.strftime("%Y-%m-%d %H:%M:%S"), person, key, groups[person], kind, profile, node)
                + (prompt, cached, output, queue, duration, outcome)
            )
            figures = (1, int(outcome == "error"), prompt, cached, output, queue, duration)
            values = (person, groups[person], key or 0, profile, node, kind)
            for sums in [rollup[(at.date(), *values[:3], kind, profile, node)]] + [
                totals[(at.date(), dimension, str(value))]
                for dimension, value in zip(("person", "group", "key", "model", "node", "kind"), values, strict=True)
            ]:
                for position, amount in enumerate(figures):
                    sums[position] += amount
            if len(batch) == 20000 or index == ROWS - 1:
                cursor.executemany(insert, batch)
                batch.clear()
    UsageDay.objects.bulk_create(
        (
            UsageDay(
                day=day,
                user_id=user,
                group_id=group,
                api_key_id=key,
                kind=kind,
                profile=profile,
                node=node,
                **dict(zip(SUMS, sums, strict=True)),
            )
            for (day, user, group, key, kind, profile, node), sums in rollup.items()
        ),
        batch_size=5000,
    )
    UsageDayTotal.objects.bulk_create(
        (
            UsageDayTotal(day=day, dimension=dimension, value=value, **dict(zip(SUMS, sums, strict=True)))
            for (day, dimension, value), sums in totals.items()
        ),
        batch_size=5000,
    )


def page_ms(staff, **narrowing) -> tuple[float, int]:
    from django.test import Client
    from django.utils import timezone as dj_timezone

    client = Client(SERVER_NAME="127.0.0.1")
    client.force_login(staff)
    start = (dj_timezone.localdate() - timedelta(days=DAYS)).isoformat()
    query = {"by": "person", "bucket": "day", "start": start, **narrowing}
    client.get("/staff/usage/", query)  # warm-up
    times = []
    for _ in range(LOADS):
        started = time.perf_counter()
        response = client.get("/staff/usage/", query)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.status_code
    return statistics.median(times), len(response.content)


def main() -> None:
    stack.django_run_dir("qwenweb-ledger-bench-")
    from django.contrib.auth.models import Group

    from chat.api.keys import create_key
    from chat.models import UsageDay, UsageDayTotal, UsageRecord
    from tests.support.client import make_user

    group_rows = [Group.objects.create(name=f"team-{number}") for number in range(5)]
    users = [make_user(f"person-{number:02d}") for number in range(PEOPLE)]
    for number, user in enumerate(users):
        user.groups.add(group_rows[number % 5])
    keys = {user.pk: create_key(user, "agent")[0].pk for user in users}
    cost = record_cost_ms(users[0], keys[users[0].pk])
    UsageRecord.objects.all().delete()
    UsageDay.objects.all().delete()
    UsageDayTotal.objects.all().delete()

    started = time.perf_counter()
    fill_ledger([user.pk for user in users], {user.pk: group_rows[n % 5].pk for n, user in enumerate(users)}, keys)
    filled_s = time.perf_counter() - started
    rows, days = UsageRecord.objects.count(), UsageDay.objects.count()
    staff = make_user("staff", is_staff=True)
    median, size = page_ms(staff)
    print(f"ledger rows {rows}, rollup rows {days}, filled in {filled_s:.1f} s; page {size} bytes")
    # Narrowed views read the rollup of every dimension: one person's (by model), and one model's (by person).
    by_model, _size = page_ms(staff, by="model", person=users[7].pk)
    by_person, _size = page_ms(staff, model="chat-8k")
    print(f"narrowed pages: one person by model {by_model:.1f} ms, one model by person {by_person:.1f} ms")
    print(f"ledger_cpu_ms_per_request={cost:.3f}")
    print(f"ledger_page_ms={median:.1f}")


if __name__ == "__main__":
    main()
