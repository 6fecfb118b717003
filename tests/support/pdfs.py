"""Real PDFs made for the tests and benchmarks with reportlab: text, CJK, two columns, scans, encrypted."""

from __future__ import annotations

import io
import random

from PIL import Image
from reportlab.lib import pdfencrypt
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.utils import ImageReader
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfgen import canvas
from reportlab.platypus import BaseDocTemplate, Frame, PageTemplate, Paragraph

WORDS = (
    "the lighthouse keeper wrote about storms ships harbour light tower sea wind night "
    "morning report budget year coast fog signal lamp repair supply boat"
).split()
CJK_FONTS = {"zh": "STSong-Light", "ja": "HeiseiMin-W3", "ko": "HYSMyeongJo-Medium"}


def _canvas(encrypt=None) -> tuple[canvas.Canvas, io.BytesIO]:
    buffer = io.BytesIO()
    return canvas.Canvas(buffer, pagesize=A4, encrypt=encrypt), buffer


def _lines(c: canvas.Canvas, lines: list[str], font: str = "Helvetica", size: int = 11, x: float = 60) -> None:
    c.setFont(font, size)
    y = 780
    for line in lines:
        c.drawString(x, y, line)
        y -= size + 4


def text_pdf(pages: list[list[str]], encrypt_password: str | None = None) -> bytes:
    """One page per list of lines."""
    encrypt = (
        pdfencrypt.StandardEncryption(encrypt_password, ownerPassword="owner-" + encrypt_password)
        if encrypt_password
        else None
    )
    c, buffer = _canvas(encrypt)
    for lines in pages:
        _lines(c, lines)
        c.showPage()
    c.save()
    return buffer.getvalue()


def report_pdf(pages: int, words_per_page: int = 40, seed: int = 1) -> bytes:
    """A report whose page N says 'Page N is about TOPIC' (a word to find it by) and some filler."""
    rng = random.Random(seed)
    content = []
    for number in range(1, pages + 1):
        filler = " ".join(rng.choice(WORDS) for _ in range(words_per_page))
        content.append([f"Page {number} is about {topic(number)}.", *_wrap(filler, 90)])
    return text_pdf(content)


def topic(number: int) -> str:
    return f"topic{number:03d}"


def _wrap(text: str, width: int) -> list[str]:
    lines, current = [], ""
    for word in text.split():
        if current and len(current) + len(word) + 1 > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    return lines + ([current] if current else [])


def cjk_pdf() -> bytes:
    for font in CJK_FONTS.values():
        pdfmetrics.registerFont(UnicodeCIDFont(font))
    c, buffer = _canvas()
    _lines(c, ["这是一份关于灯塔的报告。灯塔在海边。"], CJK_FONTS["zh"], 14)
    c.showPage()
    _lines(c, ["これは灯台の報告書です。"], CJK_FONTS["ja"], 14)
    c.showPage()
    _lines(c, ["이것은 등대에 관한 보고서입니다."], CJK_FONTS["ko"], 14)
    c.showPage()
    c.save()
    return buffer.getvalue()


def two_column_pdf() -> bytes:
    """Two columns laid out as typesetting does (left frame filled first)."""
    buffer = io.BytesIO()
    width, height = A4
    doc = BaseDocTemplate(buffer, pagesize=A4)
    frames = [
        Frame(40, 40, width / 2 - 50, height - 80, id="left"),
        Frame(width / 2 + 10, 40, width / 2 - 50, height - 80, id="right"),
    ]
    doc.addPageTemplates([PageTemplate(frames=frames)])
    style = getSampleStyleSheet()["BodyText"]
    rng = random.Random(7)
    story = [
        Paragraph(f"Paragraph {i:02d} " + " ".join(rng.choice(WORDS) for _ in range(28)), style) for i in range(20)
    ]
    doc.build(story)
    return buffer.getvalue()


def interleaved_columns_pdf() -> bytes:
    """Two columns drawn line by line across the page (left, right, left...): order must still be by column."""
    c, buffer = _canvas()
    c.setFont("Helvetica", 11)
    for i in range(12):
        c.drawString(50, 760 - i * 15, f"Left column line {i:02d} alpha")
        c.drawString(320, 760 - i * 15, f"Right column line {i:02d} beta")
    c.showPage()
    c.save()
    return buffer.getvalue()


def scanned_page_pdf(text_pages: int = 1, scanned_at: tuple[int, ...] = (2,)) -> bytes:
    """Text pages with image-only pages (a 'scan': an image, no text layer) at the given numbers."""
    image = Image.new("RGB", (400, 200), (240, 240, 240))
    for x in range(20, 380, 6):
        for y in range(40, 60):
            image.putpixel((x, y), (20, 20, 20))
    png = io.BytesIO()
    image.save(png, format="PNG")
    c, buffer = _canvas()
    total = text_pages + len(scanned_at)
    for number in range(1, total + 1):
        if number in scanned_at:
            c.drawImage(ImageReader(io.BytesIO(png.getvalue())), 60, 400, 400, 200)
        else:
            _lines(c, [f"Page {number} has real text about the harbour."])
        c.showPage()
    c.save()
    return buffer.getvalue()


def corrupt_pdf() -> bytes:
    """Starts like a PDF, then is garbage."""
    rng = random.Random(3)
    return b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + bytes(rng.randrange(256) for _ in range(4000))


# Debian's fonts-noto-cjk (the set-up installs it), its Simplified Chinese face; WenQuanYi as a second choice.
CJK_FONT_PATHS = (
    ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 2),
    ("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc", 0),
)


def cjk_font(size: int):
    """A font with Latin and CJK glyphs for Pillow; the set-up installs fonts-noto-cjk."""
    from PIL import ImageFont

    for path, index in CJK_FONT_PATHS:
        try:
            return ImageFont.truetype(path, size, index=index)
        except OSError:
            continue
    raise RuntimeError("no CJK font: install fonts-noto-cjk (make test does)")


def image_text_pdf(pages: list[list[str]], text_layer_pages: tuple[int, ...] = ()) -> bytes:
    """Image-only pages (scans, no text layer): each page's lines drawn by Pillow at 200 dpi, black on white.
    The pages numbered in ``text_layer_pages`` (1-based) are typed text instead (a mixed document)."""
    from PIL import ImageDraw

    font = cjk_font(28)  # about 10 pt: read at 300 dpi, glyphs of the height Tesseract reads best
    c, buffer = _canvas()
    width, height = A4
    for number, lines in enumerate(pages, start=1):
        if number in text_layer_pages:
            _lines(c, lines)
            c.showPage()
            continue
        image = Image.new("L", (int(width / 72 * 200), int(height / 72 * 200)), 255)
        draw = ImageDraw.Draw(image)
        for row, line in enumerate(lines):
            draw.text((120, 150 + row * 70), line, font=font, fill=0)
        png = io.BytesIO()
        image.save(png, format="PNG")
        c.drawImage(ImageReader(io.BytesIO(png.getvalue())), 0, 0, width, height)
        c.showPage()
    c.save()
    return buffer.getvalue()
