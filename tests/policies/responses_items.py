"""Builders of OpenAI Responses API input items, shaped as openai-python's ``types/responses`` params."""

from __future__ import annotations

import json
from typing import Any


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def user_parts(text: str, image: str = "data:image/png;base64,iVBORw0KGgo=") -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": text},
        {"type": "input_image", "image_url": image, "detail": "low"},
        {"type": "input_file", "file_id": "file-1", "filename": "a.pdf"}]}


def reasoning(rid: str, summary: str = "") -> dict[str, Any]:
    return {"type": "reasoning", "id": rid, "summary": [{"type": "summary_text", "text": summary}] if summary else [],
            "encrypted_content": "gAAAA" + rid}


def call(call_id: str, name: str = "lookup", **args: Any) -> dict[str, Any]:
    return {"type": "function_call", "id": "fc_" + call_id, "call_id": call_id, "name": name,
            "arguments": json.dumps(args), "status": "completed"}


def output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def custom_call(call_id: str) -> dict[str, Any]:
    return {"type": "custom_tool_call", "id": "ctc_" + call_id, "call_id": call_id, "name": "grep", "input": "x y"}


def custom_output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": text}


def web_search(wid: str) -> dict[str, Any]:
    return {"type": "web_search_call", "id": wid, "status": "completed",
            "action": {"type": "search", "query": "lisbon trams"}}


def answer(mid: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": mid, "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def compaction(cid: str) -> dict[str, Any]:
    return {"type": "compaction", "id": cid, "encrypted_content": "gAAAA-compacted-" + cid}
