"""DOCX and HTML files made for the tests: headed sections, a zip bomb, hostile markup."""

from __future__ import annotations

import io
import struct
import zipfile

import docx

SECTIONS = [
    ("Harbour lights", "The lighthouse keeper lit the lamp every night of the year."),
    ("Storm damage", "A storm in March broke two windows of the tower."),
    ("Budget", "The repair budget for next year is twelve thousand crowns."),
]


def docx_with_headings(sections: list[tuple[str, str]] = SECTIONS, intro: str = "") -> bytes:
    """A Word document: an optional untitled introduction, then one Heading 1 and one paragraph per section."""
    document = docx.Document()
    if intro:
        document.add_paragraph(intro)
    for heading, body in sections:
        document.add_heading(heading, level=1)
        document.add_paragraph(body)
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "Lamp oil", "40 litres"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def docx_zip_bomb(inflated_mb: int = 110) -> bytes:
    """A real DOCX with one more part of zeros that inflates to ``inflated_mb`` MB (about 0.1 MB packed)."""
    buffer = io.BytesIO(docx_with_headings())
    with zipfile.ZipFile(buffer, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("word/media/padding.bin", "w", force_zip64=True) as part:
            block = bytes(1024 * 1024)
            for _ in range(inflated_mb):
                part.write(block)
    return buffer.getvalue()


def html_page(sections: list[tuple[str, str]] = SECTIONS) -> bytes:
    """An HTML page with headings, inline markup, and parts that are no text: script, style, an inline handler."""
    body = "".join(f"<h2>{heading}</h2><p>{text.replace('lamp', '<b>lamp</b>')}</p>" for heading, text in sections)
    return (
        "<!DOCTYPE html><html><head><title>Keeper</title><style>p { color: red }</style>"
        "<script>document.title = 'stolen-secret-script'</script></head>"
        f"<body><p onclick=\"alert('x')\">Introduction to the report.</p>{body}"
        "<script>var leaked = 'stolen-secret-script';</script></body></html>"
    ).encode()


def docx_lying_about_its_size(inflated_mb: int = 200) -> bytes:
    """A real DOCX whose word/document.xml inflates to ``inflated_mb`` MB (trailing spaces, still XML)
    while the zip's headers declare its original, small size: a bomb that a check of the declared
    sizes lets through (about 0.2 MB packed)."""
    source = zipfile.ZipFile(io.BytesIO(docx_with_headings()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            data = source.read(info)
            if info.filename != "word/document.xml":
                archive.writestr(info.filename, data)
                continue
            declared = len(data)
            with archive.open("word/document.xml", "w", force_zip64=False) as part:
                part.write(data)
                block = b" " * (1024 * 1024)
                for _ in range(inflated_mb):
                    part.write(block)
    packed = bytearray(buffer.getvalue())
    actual = struct.pack("<I", declared + inflated_mb * 1024 * 1024)
    # The uncompressed size, in the local header and in the central directory: both say the small one.
    assert packed.count(actual) == 2
    return bytes(packed).replace(actual, struct.pack("<I", declared))
