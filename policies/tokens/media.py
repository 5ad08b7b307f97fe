"""Tokens of images, documents and audio by the providers' published rules, never as text.

A base64 image is a few hundred tokens to the model, not its length in characters: counting its
data as text made a 30 KB image 27,353 tokens, and the gate pruned a request far under budget.
Every function here takes one content block or part as the provider sends it (a dict) and says
what it costs; the counters call :func:`media_tokens` on the blocks they would otherwise read as
text, so any format (Anthropic blocks, Chat Completions parts, Responses items) gets the same rule.

The rules, as published (read 2026-12):

- **OpenAI, tile models** (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1/o3, computer-use): ``detail: low``
  costs the base; ``high`` (and ``auto``, counted as high: the upper bound) fits the image in
  2048×2048, scales it down so its short side is at most 768, and costs the base plus one tile
  per 512-px square. Base and tile by family in :data:`OPENAI_TILES` (85 + 170 per tile for gpt-4o).
- **OpenAI, patch models** (gpt-4.1-mini/nano, o4-mini, gpt-5-mini/nano): the image in 32-px
  patches, scaled down to at most 1536 patches, times the model's multiplier
  (:data:`OPENAI_PATCH_MULTIPLIER`, the docs' figures; ``detail`` does not change it).
- **Anthropic**: ``width × height / 750`` after the image is scaled down (aspect kept) to a long
  edge of at most 1568 px and at most ~1.15 megapixels (about 1,600 tokens).
- **PDF documents**: the providers put each page in as its text and an image of the page; per page
  we count :data:`PDF_PAGE_TEXT` tokens of text plus a page image (US letter at the largest size
  the rule keeps). Pages are read from the PDF's page objects (``/Type /Page``, else ``/Count``).
- **Audio** (OpenAI ``input_audio``; OpenAI publishes no rule, so an estimate):
  :data:`AUDIO_TOKENS_PER_SECOND` a second; the duration is read from a WAV header, else estimated from the bytes at the MP3 frame's bit rate.

Where the size cannot be known offline (an image or file URL, a ``file_id``), the estimate is the
largest the rule gives for that model (an upper bound: a budget gate that over-counts prunes a
little early, one that under-counts sends a request over the limit). Base64 data is never text.
Dimensions come from the image header (PNG, JPEG, GIF, WebP) of the decoded data; no network.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Mapping
from typing import Any

# (base tokens, tokens per 512-px tile) by model prefix; the longest matching prefix wins
OPENAI_TILES: dict[str, tuple[int, int]] = {
    "gpt-4o-mini": (2833, 5667),
    "gpt-4o": (85, 170),
    "gpt-4.1": (85, 170),
    "gpt-4.5": (85, 170),
    "gpt-4-turbo": (85, 170),
    "gpt-4-vision": (85, 170),
    "chatgpt-4o": (85, 170),
    "gpt-5": (70, 140),
    "o1": (75, 150),
    "o3": (75, 150),
    "computer-use": (65, 129),
    "gpt-image-1": (65, 129),
}
OPENAI_PATCH_MULTIPLIER: dict[str, float] = {
    "gpt-4.1-mini": 1.62,
    "gpt-4.1-nano": 2.46,
    "gpt-5-mini": 1.62,
    "gpt-5-nano": 2.46,
    "o4-mini": 1.72,
}
OPENAI_DEFAULT_MODEL = "gpt-4o"  # the rule used when the model is unknown
PATCH, MAX_PATCHES = 32, 1536
ANTHROPIC_LONG_EDGE = 1568
ANTHROPIC_MAX_TOKENS = 1600  # ~1.15 MP: an image past it is scaled down first
PDF_PAGE_TEXT = 1500  # text tokens per page (the low end of Anthropic's documented 1,500-3,000)
PDF_PAGE = (1275, 1650)  # a US-letter page rendered at 150 dpi, before the provider's own scaling
AUDIO_TOKENS_PER_SECOND = 10.0
AUDIO_UNKNOWN_SECONDS = 60.0  # audio by reference (no data here): counted as a minute
_MP3_BITRATES = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320)  # MPEG-1 layer III, kbit/s


# ---------------------------------------------------------------------------------- image headers
def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, JPEG, GIF or WebP header; None when the bytes are none of them."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return w, h
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return w, h
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        b = data[21:25]
        w = 1 + (((b[1] & 0x3F) << 8) | b[0])
        h = 1 + (((b[3] & 0x0F) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
        return w, h
    if chunk == b"VP8X" and len(data) >= 30:
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return w, h
        i += 2 + length
    return None


def decode_base64(data: str) -> bytes | None:
    """The bytes of a base64 string or ``data:`` URL; None when it is neither."""
    if data.startswith("data:"):
        data = data.partition(",")[2]
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None


def _head(data: str, n: int = 65536) -> bytes | None:
    """The first ``n`` decoded bytes (headers sit at the start; a JPEG's may follow an EXIF block)."""
    if data.startswith("data:"):
        data = data.partition(",")[2]
    return decode_base64(data[: (n // 3) * 4])


# ---------------------------------------------------------------------------------- the rules
def _prefix_match(model: str, table: Mapping[str, Any]) -> str | None:
    hits = [p for p in table if model.startswith(p)]
    return max(hits, key=len) if hits else None


def openai_image_tokens(width: int | None, height: int | None, detail: str = "auto",
                        model: str | None = None) -> int:
    """OpenAI's count for one image; ``width``/``height`` None means unknown (the model's maximum)."""
    model = (model or OPENAI_DEFAULT_MODEL).lower()
    patch = _prefix_match(model, OPENAI_PATCH_MULTIPLIER)
    tile = _prefix_match(model, OPENAI_TILES)
    if patch is not None and (tile is None or len(patch) >= len(tile)):
        if width is None or height is None:
            return math.ceil(MAX_PATCHES * OPENAI_PATCH_MULTIPLIER[patch])
        return math.ceil(_patches(width, height) * OPENAI_PATCH_MULTIPLIER[patch])
    base, per_tile = OPENAI_TILES[tile or OPENAI_DEFAULT_MODEL]
    if detail == "low":
        return base
    if width is None or height is None:
        return base + per_tile * 8  # 768×2048 after scaling: the most tiles the rule allows
    return base + per_tile * _tiles(width, height)


def _tiles(width: int, height: int) -> int:
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    return math.ceil(w / 512) * math.ceil(h / 512)


def _patches(width: int, height: int) -> int:
    """32-px patches after OpenAI's scale-down to at most 1536 (its published algorithm)."""
    raw = math.ceil(width / PATCH) * math.ceil(height / PATCH)
    if raw <= MAX_PATCHES:
        return raw
    shrink = math.sqrt(PATCH * PATCH * MAX_PATCHES / (width * height))
    w, h = width * shrink, height * shrink
    shrink *= min(math.floor(w / PATCH) / (w / PATCH), math.floor(h / PATCH) / (h / PATCH))
    return min(MAX_PATCHES, math.ceil(math.floor(width * shrink) / PATCH) * math.ceil(math.floor(height * shrink) / PATCH))


def anthropic_image_tokens(width: int | None, height: int | None) -> int:
    """Anthropic's ``width × height / 750`` after its scale-down (long edge 1568, ~1.15 MP)."""
    if width is None or height is None:
        return ANTHROPIC_MAX_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > ANTHROPIC_LONG_EDGE:
        scale = ANTHROPIC_LONG_EDGE / max(w, h)
        w, h = w * scale, h * scale
    if w * h / 750 > ANTHROPIC_MAX_TOKENS:
        scale = math.sqrt(ANTHROPIC_MAX_TOKENS * 750 / (w * h))
        w, h = w * scale, h * scale
    return max(1, math.ceil(int(w) * int(h) / 750))


def image_tokens(width: int | None, height: int | None, *, provider: str, detail: str = "auto",
                 model: str | None = None) -> int:
    """One image by ``provider``'s rule (``openai`` or ``anthropic``)."""
    if provider == "anthropic":
        return anthropic_image_tokens(width, height)
    return openai_image_tokens(width, height, detail, model)


def pdf_pages(data: bytes) -> int:
    """Pages of a PDF: its page objects, else its page tree's ``/Count``, else one page per 100 KB."""
    pages = len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", data))
    if pages:
        return pages
    counts = [int(c) for c in re.findall(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)", data, re.S)]
    counts += [int(c) for c in re.findall(rb"/Count\s+(\d+)[^>]*?/Type\s*/Pages\b", data, re.S)]
    return max(counts) if counts else max(1, math.ceil(len(data) / 100_000))


def pdf_tokens(pages: int, *, provider: str, model: str | None = None) -> int:
    """``pages`` pages: each its text (:data:`PDF_PAGE_TEXT`) and an image of the page."""
    return pages * (PDF_PAGE_TEXT + image_tokens(*PDF_PAGE, provider=provider, detail="high", model=model))


def audio_seconds(data: bytes, size: int | None = None) -> float:
    """Seconds of audio: from a WAV header, else the bytes at the first MP3 frame's bit rate (128 kbit/s
    if none). ``data`` may be the first bytes only, with ``size`` the whole length."""
    size = len(data) if size is None else size
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        byte_rate, i = 0, 12
        while i + 8 <= len(data):
            cid, n = data[i:i + 4], int.from_bytes(data[i + 4:i + 8], "little")
            if cid == b"fmt " and i + 20 <= len(data):
                byte_rate = int.from_bytes(data[i + 16:i + 20], "little")
            elif cid == b"data":
                if byte_rate:
                    return min(n, size - i - 8) / byte_rate
                break
            i += 8 + n + (n & 1)
    kbps = 128
    sync = data.find(b"\xff\xfb")
    if sync >= 0 and sync + 2 < len(data):
        index = data[sync + 2] >> 4
        if 0 < index < len(_MP3_BITRATES):
            kbps = _MP3_BITRATES[index]
    return size * 8 / (kbps * 1000)


def audio_tokens(seconds: float) -> int:
    return max(1, math.ceil(seconds * AUDIO_TOKENS_PER_SECOND))


# ---------------------------------------------------------------------------------- one block or part
def media_tokens(part: Any, *, provider: str | None = None, model: str | None = None) -> int | None:
    """Tokens of one content block or part if it is an image, a document or audio; None otherwise.

    Knows Anthropic ``image``/``document`` blocks (``source`` base64, url, file, text, content) and
    OpenAI ``image_url``/``input_image``/``computer_screenshot``/``file``/``input_file``/``input_audio`` parts. ``provider``
    picks the rule; without it, the part's own shape says (Anthropic blocks have a ``source``).
    """
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    source = part.get("source")
    if kind in ("image", "document") and isinstance(source, Mapping):
        rule = provider or "anthropic"
        if kind == "image":
            return _image_from(source.get("data") if source.get("type") == "base64" else None, rule, "high", model)
        return _document(source, rule, model)
    rule = provider or "openai"
    if kind == "image_url":
        ref = part.get("image_url")
        url = ref.get("url") if isinstance(ref, Mapping) else ref
        detail = ref.get("detail", "auto") if isinstance(ref, Mapping) else "auto"
        return _image_from(url if isinstance(url, str) and url.startswith("data:") else None, rule, str(detail), model)
    if kind in ("input_image", "computer_screenshot"):  # a computer-use screenshot is an image part
        url = part.get("image_url")
        return _image_from(url if isinstance(url, str) and url.startswith("data:") else None, rule,
                           str(part.get("detail") or "auto"), model)
    if kind in ("file", "input_file"):
        inner = part.get("file")
        data = (inner if isinstance(inner, Mapping) else part).get("file_data")
        raw = _head(data, 1 << 30) if isinstance(data, str) else None
        pages = pdf_pages(raw) if raw is not None else 1
        return pdf_tokens(pages, provider=rule, model=model)
    if kind == "input_audio":
        inner = part.get("input_audio")
        data = (inner if isinstance(inner, Mapping) else part).get("data")
        if not isinstance(data, str):
            return audio_tokens(AUDIO_UNKNOWN_SECONDS)
        return audio_tokens(audio_seconds(_head(data) or b"", len(data.partition(",")[2] if data.startswith("data:")
                                                                     else data) * 3 // 4))
    return None


def _image_from(data: str | None, provider: str, detail: str, model: str | None) -> int:
    size = image_size(_head(data) or b"") if data else None
    return image_tokens(*(size or (None, None)), provider=provider, detail=detail, model=model)


def _document(source: Mapping[str, Any], provider: str, model: str | None) -> int:
    kind = source.get("type")
    if kind == "text":
        return math.ceil(len(str(source.get("data", ""))) / 4)
    if kind == "content":
        content = source.get("content")
        if isinstance(content, str):
            return math.ceil(len(content) / 4)
        return sum(media_tokens(c, provider=provider, model=model) or math.ceil(len(str(c.get("text", ""))) / 4)
                   for c in content or [] if isinstance(c, Mapping))
    data = source.get("data") if kind == "base64" else None
    raw = _head(data, 1 << 30) if isinstance(data, str) else None
    return pdf_tokens(pdf_pages(raw) if raw is not None else 1, provider=provider, model=model)


def split_media(value: Any, *, provider: str | None = None, model: str | None = None) -> tuple[int, Any]:
    """(tokens of the media parts in a content list, the list without them); a content that is one
    media part (a computer-use screenshot) gives its tokens and ``""``; other values unchanged."""
    if isinstance(value, Mapping):
        n = media_tokens(value, provider=provider, model=model)
        return (0, value) if n is None else (n, "")
    if not isinstance(value, list):
        return 0, value
    tokens, rest = 0, []
    for item in value:
        n = media_tokens(item, provider=provider, model=model)
        if n is None:
            rest.append(item)
        else:
            tokens += n
    return tokens, rest
