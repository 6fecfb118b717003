"""The ledger's Prometheus counters, added to monitor's ``/metrics`` through its hook
(``monitor.public.register_metrics_collector``, registered in ``chat.apps``): requests and tokens per
group and per profile, summed from the daily rollup at scrape time (every process's rows count). Never per
person: no label carries a person's name. Rows deleted by retention leave the sums, which Prometheus
reads as a counter reset."""

from __future__ import annotations

from collections.abc import Iterator

from django.contrib.auth.models import Group
from prometheus_client.core import CounterMetricFamily

from chat.usage.selectors import totals_by

NO_GROUP = "none"


def _families(dimension: str, label: str, totals: dict) -> Iterator[CounterMetricFamily]:
    requests = CounterMetricFamily(
        f"qwenweb_usage_{dimension}_requests", f"Requests recorded in the usage ledger, per {dimension}", labels=[label]
    )
    tokens = CounterMetricFamily(
        f"qwenweb_usage_{dimension}_tokens",
        f"Tokens recorded in the usage ledger, per {dimension} and type (prompt, output)",
        labels=[label, "type"],
    )
    for name, (count, prompt, output) in sorted(totals.items()):
        requests.add_metric([name], count or 0)
        tokens.add_metric([name, "prompt"], prompt or 0)
        tokens.add_metric([name, "output"], output or 0)
    yield requests
    yield tokens


class UsageCollector:
    def collect(self) -> Iterator[CounterMetricFamily]:
        by_group = totals_by("group")
        names = dict(Group.objects.filter(pk__in=list(by_group)).values_list("pk", "name"))
        groups: dict[str, list[int]] = {}
        for group_id, sums in by_group.items():
            name = names.get(group_id) or (NO_GROUP if not group_id else f"#{group_id}")
            summed = groups.setdefault(name, [0, 0, 0])
            for index, amount in enumerate(sums):
                summed[index] += amount or 0
        yield from _families("group", "group", groups)
        yield from _families(
            "profile", "profile", {name or NO_GROUP: sums for name, sums in totals_by("model").items()}
        )
