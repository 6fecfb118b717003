"""The usage ledger: one row per chat answer, API request (chat, completions, embeddings, rerank) and
document job's model call, with who (person, API key, their primary group then), what (profile, node),
how much (prompt, cached and output tokens) and how long (queue wait, duration), and its outcome.

- ``models``: the rows (``UsageRecord``) and their daily rollup (``UsageDay``), kept by the same write.
- ``services``: recording a row (one INSERT and one UPSERT in the caller's database hop); retention.
- ``selectors``: a view of the ledger (dimension, filters, days or weeks) for the staff page, a person's
  own page and the CSV export; the totals per group and per profile for Prometheus.
- ``metrics``: the Prometheus collector monitor's ``/metrics`` reads through its hook.
- ``export``: the CSV of a view, streamed, formula cells neutralized.

How it works and its settings: docs/usage.md.
"""
