"""A document's work in a Celery worker: a new upload read then summarized in the same run
(``ingest_and_summarize``), or the summary alone (``run_summary``), each summary in an event loop
of its own whose connections close with it."""

from __future__ import annotations

import asyncio

from chat.documents.ingest import ingest
from chat.documents.summary_run import SummaryRun
from chat.models import Document


def run_summary(document_id, *, claimed: bool = False) -> str:
    """The Celery side: one event loop for the run, its connections closed with it.

    ``claimed``: the caller already holds the document (ingestion went straight on)."""

    async def main() -> str:
        run = SummaryRun(document_id, claimed=claimed)
        try:
            return await run.run()
        finally:
            if run.queue is not None:
                await run.queue.aclose()
            for client in (*run.spent_clients, run.client):
                if client is not None:
                    await client.aclose()

    return asyncio.run(main())


def ingest_and_summarize(document_id) -> str:
    """The whole pipeline for a new upload; a run that finds the pages already read goes on to the summary."""
    status = Document.objects.filter(id=document_id).values_list("status", flat=True).first()
    if status == Document.Status.SUMMARIZING:
        return run_summary(document_id)
    if not ingest(document_id):
        return Document.objects.filter(id=document_id).values_list("status", flat=True).first() or ""
    return run_summary(document_id, claimed=True)
