"""Validate and scale an attached image before it is stored or sent upstream."""

from __future__ import annotations

import base64
import binascii
import io

from django.conf import settings
from django.utils.translation import gettext as _
from PIL import Image, UnidentifiedImageError

from chat.errors import ChatError

ACCEPTED_FORMATS = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp", "GIF": "image/gif"}
Image.MAX_IMAGE_PIXELS = 50_000_000  # refuse decompression bombs


def decode_data_url(data_url: str) -> bytes:
    """Bytes of a ``data:image/...;base64,`` URL, refusing anything over the size limit."""
    limit = settings.CHAT_MAX_IMAGE_BYTES
    if not isinstance(data_url, str) or not data_url.startswith("data:image/") or ";base64," not in data_url:
        raise ChatError(_("The attachment is not an image."))
    encoded = data_url.split(",", 1)[1]
    if len(encoded) * 3 // 4 > limit:
        raise ChatError(_("The image is too large: the limit is %(mb).0f MB.") % {"mb": limit / 1_048_576})
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ChatError(_("The attachment is not an image.")) from error


def normalize_image(raw: bytes) -> tuple[bytes, str]:
    """Re-encode the image at most CHAT_IMAGE_MAX_EDGE pixels on its long edge.

    The browser scales before sending, but the server never trusts it; re-encoding
    also strips metadata (EXIF location and the like).
    """
    if len(raw) > settings.CHAT_MAX_IMAGE_BYTES:
        raise ChatError(
            _("The image is too large: the limit is %(mb).0f MB.") % {"mb": settings.CHAT_MAX_IMAGE_BYTES / 1_048_576}
        )
    try:
        with Image.open(io.BytesIO(raw)) as image:
            if image.format not in ACCEPTED_FORMATS:
                raise ChatError(_("Images must be JPEG, PNG, WebP or GIF."))
            image.load()
            image.thumbnail((settings.CHAT_IMAGE_MAX_EDGE, settings.CHAT_IMAGE_MAX_EDGE))
            has_alpha = image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info)
            out = io.BytesIO()
            if has_alpha:
                image.convert("RGBA").save(out, format="PNG", optimize=True)
                return out.getvalue(), "image/png"
            image.convert("RGB").save(out, format="JPEG", quality=88)
            return out.getvalue(), "image/jpeg"
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, SyntaxError) as error:
        raise ChatError(_("The attachment is not an image this server can read.")) from error
