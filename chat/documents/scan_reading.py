"""Scanned pages read by the model itself, where an admin chose so for a profile with a vision projector.

The extraction child (``sandbox``) never talks to the network: it renders each scan with PDFium
as a PNG of at most DOCUMENT_VISION_MAX_EDGE pixels on its long edge and reports it. The worker
then sends the pages one at a time to llama-server's chat completions, as an image with an
instruction to transcribe it, through the profile's client, each in the profile's fair queue
as background work (people go first). The transcription is hostile text like any page's:
cleaned the same way and cut at DOCUMENT_VISION_PAGE_CHARS. When the model cannot read them
(no vision projector, the server down or refusing images), the pages left are read by
Tesseract here instead, and the document's card says why.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils.translation import gettext as _
from PIL import Image

from chat.documents.model_calls import completion_text
from chat.documents.page_text import clean_text
from chat.documents.pdf.ocr import OcrFailed, recognize_png
from chat.documents.pdf.reader import ocr_options
from chat.documents.sandbox import Cancelled
from chat.models import Document
from monitor.public import (
    LlamaError,
    ServerProfile,
    ServingPool,
    await_while_alive,
    close_loop_clients,
    find_profile,
    serving_pool,
)

log = logging.getLogger(__name__)

TRANSCRIBE_SYSTEM = (
    "You transcribe scanned pages. Write out all the text on the page image exactly as written, "
    "in its own language and in reading order. Do not describe, summarize, translate or add anything."
)

# Stores one page's text; False when the person cancelled.
Store = Callable[[int, str], bool]
# The run's heartbeat while a page is read (or waits for a slot); False when the person cancelled.
Alive = Callable[[], bool]
ALIVE_POLL_S = 0.5


@dataclass
class ScanReading:
    by_model: list[int]
    by_ocr: list[int]
    note: str  # for the card: why the model did not read them all ("" when it did)


def fallback_note(reason: str) -> str:
    return _("The model could not read the scanned pages (%(reason)s), so text recognition (OCR) read them.") % {
        "reason": reason
    }


def model_reader(document: Document) -> tuple[ServerProfile | None, str]:
    """The profile whose model is to read the document's scans. None when Tesseract reads them:
    with the card's note when an admin chose the model but the profile has no vision projector."""
    try:
        profile = (document.conversation.profile if document.conversation_id else None) or find_profile(None)
    except LlamaError:  # no profile at all: the summary says so
        return None, ""
    if profile.scan_reader != ServerProfile.ScanReader.MODEL:
        return None, ""
    if not profile.mmproj_file:
        return None, fallback_note(_("its server profile has no vision projector"))
    return profile, ""


def read_scans(
    profile: ServerProfile,
    owner_id: int,
    scans: list[tuple[int, Path]],
    store: Store,
    alive: Alive,
) -> ScanReading:
    """Each scan (page number, its PNG) read by the model, page by page; those it could not read
    by Tesseract. Raises Cancelled when the person stopped the document."""
    by_model, reason = asyncio.run(_with_model(profile, owner_id, scans, store, alive))
    if not reason:
        return ScanReading(by_model, [], "")
    log.warning("scans read by OCR instead of %s: %s", profile.name, reason)
    left = [(number, file) for number, file in scans if number not in set(by_model)]
    return ScanReading(by_model, _with_tesseract(left, store), fallback_note(reason))


async def _with_model(
    profile: ServerProfile, owner_id: int, scans: list[tuple[int, Path]], store: Store, alive: Alive
) -> tuple[list[int], str]:
    """The pages the model read, and why it stopped ("" when it read them all)."""
    done: list[int] = []
    try:
        try:
            pool = await serving_pool(profile)
        except LlamaError as error:
            return done, str(error)
        if not pool.info.vision:
            return done, _("the server it runs on does not accept images")
        for number, file in scans:
            try:
                text = await await_while_alive(
                    _transcribe(pool, f"owner:{owner_id}", file.read_bytes()),
                    sync_to_async(alive),
                    ALIVE_POLL_S,
                    Cancelled,
                )
            except LlamaError as error:
                return done, str(error)
            if not await sync_to_async(store)(number, text):
                raise Cancelled()
            done.append(number)
        return done, ""
    finally:
        await close_loop_clients()


async def _transcribe(pool: ServingPool, owner: str, png: bytes) -> str:
    image = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    payload = {
        "messages": [
            {"role": "system", "content": TRANSCRIBE_SYSTEM},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Transcribe this page."},
                    {"type": "image_url", "image_url": {"url": image}},
                ],
            },
        ],
        "max_tokens": settings.DOCUMENT_VISION_MAX_TOKENS,
        "temperature": 0,
    }
    # Background work: people go first, and documents take turns by owner.
    async with pool.slot(owner, priority="background") as slot:
        text = await completion_text(slot, payload)
    return clean_text(text)[: settings.DOCUMENT_VISION_PAGE_CHARS]


def _with_tesseract(scans: list[tuple[int, Path]], store: Store) -> list[int]:
    """The pages Tesseract read (all of them, unless it is missing or fails on one)."""
    options = ocr_options()
    read: list[int] = []
    for number, file in scans:
        text = ""
        if options is not None:
            png = file.read_bytes()
            with Image.open(io.BytesIO(png)) as image:  # our own PNG: its resolution as rendered
                dpi = round(image.info.get("dpi", (options.dpi,))[0])
            try:
                text = clean_text(recognize_png(png, replace(options, dpi=dpi)))
                read.append(number)
            except OcrFailed as error:
                log.warning("page %d: text recognition failed: %s", number, error)
        if not store(number, text):
            raise Cancelled()
    return read
