"""A document's work in a Celery worker: a new upload read then summarized in the same run
(``ingest_and_summarize``), or the summary alone (``run_summary``), each summary in an event loop
of its own whose connections close with it."""

from __future__ import annotations

import asyncio

from chat.documents.ingest import ingest
from chat.documents.summary_run import SummaryRun
from chat.models import Document
from monitor.public import close_loop_clients


def run_summary(document_id, *, claimed: bool = False) -> str:
    """The Celery side: one event loop for the run, its connections closed with it.

    ``claimed``: the caller already holds the document (ingestion went straight on)."""

    async def main() -> str:
        try:
            return await SummaryRun(document_id, claimed=claimed).run()
        finally:
            await close_loop_clients()

    return asyncio.run(main())


def ingest_and_summarize(document_id) -> str:
    """The whole pipeline for a new upload; a run that finds the pages already read goes on to the summary."""
    status = Document.objects.filter(id=document_id).values_list("status", flat=True).first()
    if status == Document.Status.SUMMARIZING:
        return run_summary(document_id)
    if not ingest(document_id):
        return Document.objects.filter(id=document_id).values_list("status", flat=True).first() or ""
    return run_summary(document_id, claimed=True)
