import io

import pytest
from django.test import override_settings
from PIL import Image

from chat.conversations.images import decode_data_url, normalize_image
from chat.conversations.messages import build_messages, sampling_options
from chat.errors import ChatError
from chat.models import Message
from qwenweb.origin import is_same_origin


def png_bytes(width: int, height: int, mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    Image.new(mode, (width, height), "red").save(out, format="PNG")
    return out.getvalue()


def test_image_is_scaled_to_512_on_the_long_edge():
    data, mime = normalize_image(png_bytes(2000, 1000))
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (512, 256)
    assert mime == "image/jpeg"


def test_transparent_image_stays_png():
    _, mime = normalize_image(png_bytes(100, 100, "RGBA"))
    assert mime == "image/png"


def test_not_an_image_is_refused():
    with pytest.raises(ChatError, match="not an image"):
        normalize_image(b"%PDF-1.4 definitely not a picture")
    with pytest.raises(ChatError, match="not an image"):
        decode_data_url("data:text/html;base64,PGh0bWw+")


def test_oversized_image_names_the_limit():
    with override_settings(CHAT_MAX_IMAGE_BYTES=2 * 1_048_576):
        with pytest.raises(ChatError, match="the limit is 2 MB"):
            decode_data_url("data:image/png;base64," + "A" * (3 * 1_048_576))


def msg(role, content="", image_type="", image=None):
    return Message(role=role, content=content, image_type=image_type, image=image)


def test_history_merges_repeated_roles_and_skips_empty_answers():
    history = [
        msg("user", "one"),
        msg("assistant", ""),
        msg("user", "two"),
        msg("assistant", "answer"),
        msg("user", "three"),
    ]
    assert build_messages(history) == [
        {"role": "user", "content": "one\n\ntwo"},
        {"role": "assistant", "content": "answer"},
        {"role": "user", "content": "three"},
    ]


def test_history_sends_images_as_image_url_parts():
    (message,) = build_messages([msg("user", "what is this?", "image/png", b"\x89PNG")])
    assert message["content"][0] == {"type": "text", "text": "what is this?"}
    assert message["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_sampling_options_accept_only_known_values():
    assert sampling_options({"seed": 42, "max_tokens": 16, "temperature": 0}) == {
        "seed": 42,
        "max_tokens": 16,
        "temperature": 0.0,
    }
    for bad in ({"seed": -1}, {"max_tokens": 10**9}, {"grammar": "x"}, "seed"):
        with pytest.raises(ChatError):
            sampling_options(bad)


@pytest.mark.parametrize(
    "origin,host,ok",
    [
        ("http://192.168.1.5:8000", "192.168.1.5:8000", True),
        ("http://evil.example", "192.168.1.5:8000", False),
        (None, "192.168.1.5:8000", False),
        ("null", "192.168.1.5:8000", False),
    ],
)
def test_websocket_origin_must_match_host(origin, host, ok):
    headers = [(b"host", host.encode())]
    if origin:
        headers.append((b"origin", origin.encode()))
    assert is_same_origin({"headers": headers}) is ok
