"""Reading PDFs: opening one with PDFium (``opening``), its pages' text and scans (``reader``: text
layers by Poppler's pdftotext in ``poppler_text``, the rest by PDFium in ``pages``, scans by
Tesseract in ``ocr``), and an uploaded PDF's check in a limited child (``upload_check``, whose child
is ``upload_check_worker``). Nothing here knows of the documents' rows, the worker's runs or the
model; ``opening``, ``pages``, ``poppler_text`` and ``ocr`` load no Django (child processes run them).
"""
