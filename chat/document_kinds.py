"""The kinds of file a document can be: the values ``Document.kind`` stores. No models here: the
reading child (``extract_worker``) compares with them without loading the app registry."""

PDF = "pdf"
TEXT = "txt"
MARKDOWN = "md"
DOCX = "docx"
HTML = "html"
