"""Images, documents and audio counted by the providers' published rules, never their base64 as text."""

from __future__ import annotations

import base64
import io
import wave

import pytest
from PIL import Image

from policies import ApproxTokenCounter, Context, Gate, get_policy
from policies.convert import from_anthropic, from_openai
from policies.decision import DecisionKind
from policies.tokens import counter_for
from policies.tokens.calibrated import AnthropicCounter
from policies.tokens.media import (
    anthropic_image_tokens,
    audio_seconds,
    image_size,
    media_tokens,
    openai_image_tokens,
    pdf_pages,
)


def encoded(width: int, height: int, fmt: str, **save: object) -> bytes:
    """A real image file of that size, written by Pillow (the header the parser must read)."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 90)).save(out, fmt, **save)
    return out.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# The providers' own worked examples (OpenAI "Images and vision": calculating costs; Anthropic
# "Vision": the image-size table), each with the count the page gives.
PUBLISHED = [
    ("openai", "gpt-4o", 1024, 1024, "high", 765),
    ("openai", "gpt-4o", 2048, 4096, "high", 1105),
    ("openai", "gpt-4o", 4096, 8192, "low", 85),
    ("openai", "gpt-4o", 4096, 8192, "auto", 1105),  # auto counted as high: the upper bound
    ("openai", "gpt-4o-mini", 1024, 1024, "high", 2833 + 4 * 5667),
    ("openai", "gpt-5", 1024, 1024, "high", 70 + 4 * 140),
    ("openai", "o3", 512, 512, "high", 75 + 150),
    ("openai", "gpt-4.1-mini", 1024, 1024, "high", round(1024 * 1.62)),
    ("openai", "gpt-4.1-mini", 1800, 2400, "high", round(1452 * 1.62)),
    ("openai", "gpt-4.1-nano", 1024, 1024, "low", round(1024 * 2.46)),  # detail does not change patches
    ("openai", "o4-mini", 1800, 2400, "high", round(1452 * 1.72)),
    ("anthropic", None, 200, 200, "auto", 54),
    ("anthropic", None, 1000, 1000, "auto", 1334),
    ("anthropic", None, 1092, 1092, "auto", 1590),
    ("anthropic", None, 4000, 3000, "auto", 1600),  # scaled down to ~1.15 MP first
    ("anthropic", None, 3000, 500, "auto", 1568 * 261 // 750),  # long edge to 1568 first
]


@pytest.mark.parametrize(("provider", "model", "w", "h", "detail", "published"), PUBLISHED)
def test_an_image_costs_what_the_provider_publishes(provider, model, w, h, detail, published):
    png = encoded(w, h, "PNG")
    if provider == "anthropic":
        block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(png)}}
    else:
        block = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(png)}", "detail": detail}}
    got = media_tokens(block, provider=provider, model=model)
    assert got is not None and abs(got - published) <= 0.10 * published, (got, published)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
@pytest.mark.parametrize("size", [(1, 1), (256, 256), (640, 480), (1037, 3001)])
def test_dimensions_are_read_from_each_format_s_header(fmt, size):
    assert image_size(encoded(*size, fmt)) == size


def test_a_lossless_webp_and_a_progressive_jpeg_are_read_too():
    assert image_size(encoded(333, 77, "WEBP", lossless=True)) == (333, 77)
    assert image_size(encoded(333, 77, "JPEG", progressive=True)) == (333, 77)
    exif = Image.Exif()
    exif[0x010E] = "x" * 5000  # a large APP1 block before the frame header
    out = io.BytesIO()
    Image.new("RGB", (901, 403)).save(out, "JPEG", exif=exif)
    assert image_size(out.getvalue()) == (901, 403)


def test_not_an_image_has_no_size():
    assert image_size(b"%PDF-1.4 hello") is None
    assert image_size(b"") is None


def test_the_issue_s_images_are_counted_by_the_rule_not_as_text():
    # issue 24: a 256x256 PNG counted 179,102 (OpenAI) and 110,889 (Anthropic) tokens as text
    png = b64(encoded(256, 256, "PNG", compress_level=0))
    oa = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}", "detail": "low"}}]}]}
    msgs, _ = from_openai(oa)
    exact = counter_for("openai", "gpt-4o")
    assert exact.count(msgs[0]) < 85 + 20
    assert ApproxTokenCounter().count(msgs[0]) < 200 + 20  # gpt-4o rule at auto: 85 + 170 (256 px: one tile)
    an = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]}]}
    amsgs, _ = from_anthropic(an)
    assert AnthropicCounter().count(amsgs[0]) < anthropic_image_tokens(256, 256) + 60  # + the text and framing


def test_an_image_in_a_tool_result_is_counted_by_the_rule():
    png = b64(encoded(1000, 1000, "PNG"))
    body = {"messages": [
        {"role": "user", "content": "screenshot please"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": "here"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]}]}]}
    msgs, _ = from_anthropic(body)
    for counter in (AnthropicCounter(), ApproxTokenCounter()):
        n = counter.count(msgs[2])
        assert 1334 <= n < 1334 + 60, (counter, n)


def test_a_gated_request_with_an_image_under_budget_is_not_pruned():
    png = b64(encoded(256, 256, "PNG", compress_level=0))
    ctx = Context.from_anthropic({"messages": [
        {"role": "user", "content": "Describe the picture."},
        {"role": "assistant", "content": "Send it."},
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]}]},
        token_counter=AnthropicCounter())
    assert ctx.request_tokens < 200  # its base64 (~260 KB) as text would be ~100,000
    decision = Gate(get_policy("recency"), budget=1000).check(ctx)
    assert decision.kind == DecisionKind.WITHIN_BUDGET and len(ctx.messages) == 3


def test_urls_and_file_ids_get_the_rule_s_largest_count():
    url = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    assert media_tokens(url, model="gpt-4o") == openai_image_tokens(768, 2048, "high", "gpt-4o") == 85 + 8 * 170
    assert media_tokens({**url, "image_url": {"url": "https://x/y.png", "detail": "low"}}) == 85
    assert media_tokens({"type": "input_image", "image_url": "https://x/y.png"}, model="gpt-4.1-mini") \
        == round(1536 * 1.62 + 0.5)
    assert media_tokens({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}) == 1600
    assert media_tokens({"type": "input_image", "file_id": "file-1"}, model="gpt-5") == 70 + 8 * 140


def pdf(pages: int) -> bytes:
    objs = "".join(f"{i + 3} 0 obj << /Type /Page /Parent 2 0 R >> endobj\n" for i in range(pages))
    kids = " ".join(f"{i + 3} 0 R" for i in range(pages))
    return (f"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
            f"2 0 obj << /Type /Pages /Kids [{kids}] /Count {pages} >> endobj\n{objs}%%EOF").encode()


def test_a_pdf_is_counted_per_page():
    assert pdf_pages(pdf(1)) == 1 and pdf_pages(pdf(7)) == 7
    assert pdf_pages(b"%PDF-1.7 /Type /Pages /Count 12 (object streams)") == 12
    one = media_tokens({"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                        "data": b64(pdf(1))}})
    three = media_tokens({"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                          "data": b64(pdf(3))}})
    assert one is not None and three == 3 * one
    assert 1500 < one <= 3100  # Anthropic: 1,500-3,000 text tokens a page, plus the page as an image
    part = {"type": "file", "file": {"filename": "a.pdf", "file_data": f"data:application/pdf;base64,{b64(pdf(2))}"}}
    assert media_tokens(part, model="gpt-4o") == 2 * media_tokens({**part, "file": {"file_data": b64(pdf(1))}},
                                                                   model="gpt-4o")
    assert media_tokens({"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                        "data": "x" * 400}}) == 100


def test_audio_is_counted_by_its_duration():
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\x00\x00" * 16000 * 3)  # three seconds
    data = out.getvalue()
    assert audio_seconds(data) == pytest.approx(3.0)
    part = {"type": "input_audio", "input_audio": {"data": b64(data), "format": "wav"}}
    assert media_tokens(part) == 30
    mp3 = b"\xff\xfb\x90\x00" + b"\x00" * (16000 - 4)  # 128 kbit/s frames: 16 kB is one second
    assert audio_seconds(mp3) == pytest.approx(1.0)


def test_text_parts_are_not_media():
    assert media_tokens({"type": "text", "text": "hi"}) is None
    assert media_tokens({"type": "input_text", "text": "hi"}) is None
    assert media_tokens("plain") is None


def test_a_computer_use_screenshot_output_is_counted_as_an_image():
    png = b64(encoded(1024, 768, "PNG", compress_level=0))  # ~3 MB of base64: ~800,000 tokens as text
    body = {"model": "computer-use-preview", "input": [
        {"role": "user", "content": "open the settings"},
        {"type": "computer_call", "id": "cu_1", "call_id": "cc1", "action": {"type": "screenshot"},
         "pending_safety_checks": [], "status": "completed"},
        {"type": "computer_call_output", "call_id": "cc1",
         "output": {"type": "computer_screenshot", "image_url": f"data:image/png;base64,{png}"}}]}
    ctx = Context.from_responses(body, token_counter=counter_for("openai", "computer-use-preview"))
    shot = ctx.messages[-1]
    rule = openai_image_tokens(1024, 768, "high", "computer-use-preview")  # 65 + 129 per tile
    assert rule == 65 + 129 * 4
    for counter in (counter_for("openai", "computer-use-preview"), ApproxTokenCounter()):
        n = counter.count(shot)
        assert n < 2 * 1445, (counter, n)
    assert rule <= ctx.counter.count(shot) < rule + 30
