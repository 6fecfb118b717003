"""Documents people attach: upload checks, text extraction, ingestion, summaries and retrieval."""
