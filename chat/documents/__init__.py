"""Documents people attach: the upload's checks, reading their text into pages, whole-document
summaries, and the passages a question is answered from.

- At the upload: ``uploads`` (the border's checks, the file kept for the worker), ``formats``
  (DOCX and HTML), ``extraction`` (a file's pages in any format), ``page_text``.
- PDFs: the ``pdf`` sub-package (opening with PDFium, text layers by Poppler, scans by OCR, the
  upload's check in a limited child).
- In the worker: ``pipeline`` (what a Celery task runs), ``ingest`` (a document's pages read in a
  limited child, ``extract_worker``, through ``sandbox``, under ``child_limits``; scans read by the
  model in ``scan_reading``), ``heartbeats`` (a run's claim, heartbeat and the person's cancel;
  stalled runs), ``summary_run`` (the map-reduce run; ``summary_plan``, ``summary_review``,
  ``citations``, ``overlap``), ``final_summary`` (the text the person reads), ``model_calls``.
- Reads in ``selectors``, writes in ``services``, deletion in ``removal``; ``languages`` (the one
  list of summary languages); ``retrieval`` (passages for questions).
"""
