"""Exact OpenAI token counts, offline: tiktoken with the encoding files of the ``bpe-openai`` wheel.

tiktoken downloads its encodings on first use; nothing may download here. The PyPI wheel
``bpe-openai`` ships the genuine ``o200k_base``/``cl100k_base`` rank files (gzipped). We read them
from the installed wheel without importing it, check them against the SHA-256 that tiktoken itself
expects, and build the encoding with tiktoken's own constructor (its regex and special tokens).

Counting follows the chat framing the models see: each message is ``<|im_start|>role<|im_sep|>
content<|im_end|>``; a lone tool call is addressed ``assistant to=functions.NAME``; parallel calls
go through ``multi_tool_use.parallel``; tool results are spoken by ``functions.NAME``; tool
definitions are rendered as a TypeScript namespace. ``framing="harmony"`` is the format of the
gpt-5 / o-series models (channels, a system preamble). Measured in bench/bench_tokens.py.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import threading
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import PolicyError
from ..messages import OTHER, REDACTED_THINKING, TEXT, THINKING, TOOL_USE, Block, Message
from .media import media_tokens, split_media

ENCODINGS = ("o200k_base", "cl100k_base")
FRAMINGS = ("chat", "harmony")
_CACHE: dict[str, Any] = {}
_LOCK = threading.Lock()
RESULT_NAME = "functions.tool"  # a result's speaker when its call's name is unknown (~ the mean name)
_BOOKKEEPING = ("id", "call_id", "status", "execution")
HARMONY_SYSTEM = "# Valid channels: analysis, commentary, final. Channel must be included for every message."


HARMONY_MODELS = ("gpt-5", "o1", "o3", "o4", "gpt-oss", "codex")
CL100K_MODELS = ("gpt-4-", "gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")


def framing_for(model: str | None) -> str:
    """``harmony`` for the models trained on it (gpt-5, the o-series, gpt-oss, codex), else ``chat``.

    Matched on the model name with any provider prefix (``openai/``, ``azure/``) dropped.
    """
    name = (model or "").lower().rsplit("/", 1)[-1]
    return "harmony" if name.startswith(HARMONY_MODELS) else "chat"


def encoding_for(model: str | None) -> str:
    """``cl100k_base`` for gpt-4 (not 4o/4.1/4.5) and gpt-3.5, else ``o200k_base``."""
    name = (model or "").lower().rsplit("/", 1)[-1]
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5")):
        return "o200k_base"
    return "cl100k_base" if name.startswith(CL100K_MODELS) else "o200k_base"


def available() -> bool:
    """tiktoken and the bpe-openai data are both installed."""
    return importlib.util.find_spec("tiktoken") is not None and _data_dir() is not None


def _data_dir() -> Path | None:
    spec = importlib.util.find_spec("bpe_openai")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / "data"
        if path.is_dir():
            return path
    return None


def load_encoding(name: str = "o200k_base") -> Any:
    """The tiktoken ``Encoding`` ``name``, built offline from the bpe-openai wheel's verified data."""
    if name not in ENCODINGS:
        raise PolicyError(f"unknown encoding {name!r}; choose one of {', '.join(ENCODINGS)}")
    with _LOCK:
        if name in _CACHE:
            return _CACHE[name]
        try:
            import tiktoken  # noqa: PLC0415 - optional extra
            from tiktoken_ext import openai_public  # noqa: PLC0415
        except ImportError as exc:
            raise PolicyError("exact token counts need the extra: pip install 'prunegate[tokens]'") from exc
        data = _data_dir()
        if data is None:
            raise PolicyError("exact token counts need the bpe-openai wheel: pip install 'prunegate[tokens]'")

        def load_tiktoken_bpe(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
            stem = url.rsplit("/", 1)[-1].split(".")[0]
            path = data / f"{stem}.tiktoken.gz"
            raw = gzip.decompress(path.read_bytes())
            digest = hashlib.sha256(raw).hexdigest()
            if expected_hash is not None and digest != expected_hash:
                raise PolicyError(f"{path}: SHA-256 {digest} is not the {stem} tiktoken expects ({expected_hash})")
            return {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in raw.splitlines() if line)}

        ctor = openai_public.ENCODING_CONSTRUCTORS[name]
        # tiktoken's own constructor, with the loader swapped for the offline one (nothing global changes)
        offline = types.FunctionType(ctor.__code__, {**ctor.__globals__, "load_tiktoken_bpe": load_tiktoken_bpe})
        enc = tiktoken.Encoding(**offline())
        _CACHE[name] = enc
        return enc


class TiktokenCounter:
    """Exact BPE counts of messages and of whole requests in OpenAI's framing (see the module doc)."""

    def __init__(self, encoding: str | None = None, framing: str = "auto", model: str | None = None) -> None:
        if framing != "auto" and framing not in FRAMINGS:
            raise PolicyError(f"unknown framing {framing!r}; choose auto or one of {', '.join(FRAMINGS)}")
        self.model = model
        self.encoding = encoding or encoding_for(model)
        self.framing = framing_for(model) if framing == "auto" else framing
        self._enc = load_encoding(self.encoding)

    def tokens(self, text: str) -> int:
        """BPE tokens of ``text`` (special-token text counted as plain text, as the API does)."""
        return len(self._enc.encode(text, disallowed_special=())) if text else 0

    # ------------------------------------------------------------------ messages
    def count(self, message: Message) -> int:
        harmony = self.framing == "harmony"
        n = 0
        texts = []
        for b in message.blocks:
            if b.type == OTHER and (media := media_tokens(b.extra, provider="openai", model=self.model)) is not None:
                n += media  # an image, a file, audio: OpenAI's rule, never its base64 as text
            elif b.type in (TEXT, THINKING, REDACTED_THINKING, OTHER):
                texts.append(_block_text(b))
        calls = [b for b in message.blocks if b.type == TOOL_USE or b.call_id]
        results = [b for b in message.blocks if b.answers]
        text = "".join(texts)
        if text or not (calls or results):
            role = "developer" if message.role == "developer" else message.role
            n += 3 + self.tokens(role) + self.tokens(text)
            if harmony and message.role == "assistant":
                n += 2  # <|channel|>final
        for b in results:
            speaker = f"functions.{b.name}" if b.name else RESULT_NAME
            media, content = split_media(b.content, provider="openai", model=self.model)
            n += media
            if harmony:
                n += 5 + self.tokens(f"{speaker} to=assistant") + self.tokens(_result_text(content))
            else:
                n += 3 + self.tokens(speaker) + self.tokens(_result_text(content))
        if harmony:
            for b in calls:
                # <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS<|call|>
                n += 5 + self.tokens("assistant") + self.tokens("commentary") + self.tokens(f" to=functions.{b.name} ") \
                    + self.tokens("json") + self.tokens(_arguments(b))
        elif len(calls) == 1:
            n += 3 + self.tokens(f"assistant to=functions.{calls[0].name}") + self.tokens(_arguments(calls[0]))
        elif calls:
            uses = [{"recipient_name": f"functions.{b.name}", "parameters": _input(b)} for b in calls]
            n += 3 + self.tokens("assistant to=multi_tool_use.parallel") \
                + self.tokens(json.dumps({"tool_uses": uses}, ensure_ascii=False, separators=(",", ":")))
        return n

    # ------------------------------------------------------------------ the rest of the request
    def count_request_extra(self, extra: Mapping[str, Any], *, has_system: bool = False) -> int:
        """Tool definitions (as the TypeScript namespace the model reads), instructions, request framing.

        ``has_system``: the messages already hold a system message, which the tools join (no
        message of their own).
        """
        tools = [t for t in extra.get("tools") or [] if _function(t) is not None]
        instructions = extra.get("instructions") if isinstance(extra.get("instructions"), str) else ""
        if self.framing == "harmony":
            n = 3 + self.tokens("system") + self.tokens(HARMONY_SYSTEM) + 2  # preamble and the reply's priming
            dev = f"# Instructions\n\n{instructions}" if instructions else ""
            if tools:
                dev += ("\n\n" if dev else "") + tools_namespace(tools)
            return n + (3 + self.tokens("developer") + self.tokens(dev) if dev else 0)
        n = 3  # <|im_start|>assistant<|im_sep|> priming the reply
        if instructions:
            n += 3 + self.tokens("developer") + self.tokens(instructions)
        if tools:
            n += self.tokens(tools_namespace(tools)) + (0 if has_system or instructions else 4)
        return n


def _function(tool: Any) -> Mapping[str, Any] | None:
    """The function definition of a Chat Completions tool, a Responses tool or an Anthropic tool."""
    if not isinstance(tool, Mapping):
        return None
    if isinstance(tool.get("function"), Mapping):
        return tool["function"]
    if tool.get("type") in (None, "function", "custom") and isinstance(tool.get("name"), str):
        return tool
    return None


def tools_namespace(tools: list[Any]) -> str:
    """The TypeScript-like namespace OpenAI renders function tools into (the text the model reads)."""
    out = ["# Tools\n\n## functions\n\nnamespace functions {\n\n"]
    for tool in tools:
        fn = _function(tool)
        if fn is None:
            continue
        desc = (fn.get("description") or "").strip()
        if desc:
            out.append(f"// {desc}\n")
        params = fn.get("parameters") or fn.get("input_schema") or {}
        if isinstance(params, Mapping) and params.get("properties"):
            out.append(f"type {fn.get('name', '')} = (_: {{\n{_props(params)}}}) => any;\n\n")
        else:
            out.append(f"type {fn.get('name', '')} = () => any;\n\n")
    out.append("} // namespace functions")
    return "".join(out)


def _props(schema: Mapping[str, Any]) -> str:
    required = set(schema.get("required") or [])
    lines = []
    for key, sub in (schema.get("properties") or {}).items():
        sub = sub if isinstance(sub, Mapping) else {}
        if sub.get("description"):
            lines.append(f"// {sub['description']}\n")
        line = f"{key}{'' if key in required else '?'}: {_ts_type(sub)},"
        if "default" in sub:
            line += f" // default: {json.dumps(sub['default'])}"
        lines.append(line + "\n")
    return "".join(lines)


def _ts_type(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        return f"{_ts_type(items if isinstance(items, Mapping) else {})}[]"
    if kind == "object" and schema.get("properties"):
        return "{\n" + _props(schema) + "}"
    if kind == "integer":
        return "number"
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    return str(kind) if kind else "any"


def _arguments(block: Block) -> str:
    raw = block.extra.get("arguments")
    if isinstance(raw, str):
        return raw
    if isinstance(block.input, str):
        return block.input
    return json.dumps(block.input if block.input is not None else {}, ensure_ascii=False, separators=(",", ":"))


def _input(block: Block) -> Any:
    return block.input if block.input is not None else {}


def _result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [c.get("text", "") if isinstance(c, Mapping) and c.get("type") == "text"
                 else json.dumps(c, ensure_ascii=False) for c in content]
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _block_text(block: Block) -> str:
    if block.type == OTHER:  # an item the gate carries opaquely; its ids and status are API bookkeeping
        shown = {k: v for k, v in block.extra.items() if k not in _BOOKKEEPING}
        return json.dumps(shown, ensure_ascii=False)
    return block.plain_text()
