"""The official SDK clients with the gate in front: ``guard.wrap(client)``.

::

    guard = PruneGuard("recency", budget=60_000, provider="anthropic", store="./prunegate-store")
    client = guard.wrap(anthropic.Anthropic())
    client.messages.create(model=..., max_tokens=..., messages=history)      # gated, traced

Every model call an agent makes through the client goes through :meth:`PruneGuard.gate` (the
request's history in, the gated history out) and its answer through
:meth:`PruneGuard.record_response`, errors included. Covered: ``anthropic.Anthropic`` and
``AsyncAnthropic`` (``messages.create``, with ``stream=True`` too, and ``messages.stream``);
``openai.OpenAI`` and ``AsyncOpenAI`` (``chat.completions.create`` and ``responses.create``, with
``stream=True`` too). A stream is recorded when it ends, from what it carried. Everything else on
the client is the client's own. The guard never breaks the call: what it cannot handle goes out
unchanged, counted (``guard.errors``).
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from policies import convert
from policies.errors import SettingsError
from tracer.contract import names as sn

if TYPE_CHECKING:
    from tracer.guard.instrument import PruneGuard

log = logging.getLogger(sn.SCOPE)
SDK_OPTIONS = ("extra_headers", "extra_query", "extra_body", "timeout")  # the SDK's, not the request body's


def client_provider(client: Any) -> str:
    """``anthropic`` or ``openai`` for an official SDK client; :class:`SettingsError` for anything else."""
    module = type(client).__module__.split(".")[0]
    if module == "anthropic" and hasattr(client, "messages"):
        return convert.ANTHROPIC
    if module == "openai" and hasattr(client, "chat"):
        return convert.OPENAI
    raise SettingsError(f"PruneGuard.wrap: expected an anthropic.Anthropic/AsyncAnthropic or openai.OpenAI/AsyncOpenAI "
                        f"client, got {type(client).__module__}.{type(client).__name__}")


def wrap(guard: PruneGuard, client: Any, conversation: str | None = None) -> Any:
    """``client`` with its model calls gated by ``guard`` (see the module)."""
    provider = client_provider(client)
    if provider != guard.provider:
        raise SettingsError(f"PruneGuard.wrap: a {provider} client needs a guard made with provider={provider!r} "
                            f"(this one has {guard.provider!r})")
    if conversation is not None and not isinstance(conversation, str):
        raise SettingsError(f"PruneGuard.wrap: conversation must be a string or None, got {type(conversation).__name__}")
    call = _Call(guard, conversation)
    if provider == convert.ANTHROPIC:
        return _Proxy(client, messages=_Proxy(client.messages, create=call.create(client.messages.create, "anthropic"),
                                              stream=call.stream_manager(client.messages.stream)))
    chat = _Proxy(client.chat, completions=_Proxy(client.chat.completions,
                                                   create=call.create(client.chat.completions.create, "chat")))
    return _Proxy(client, chat=chat, responses=_Proxy(client.responses,
                                                      create=call.create(client.responses.create, "responses")))


class _Proxy:
    """An SDK object with some attributes replaced; every other attribute is the object's own."""

    def __init__(self, target: Any, **replaced: Any) -> None:
        self._target = target
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)

    def __repr__(self) -> str:
        return f"<gated {self._target!r}>"


class _Call:
    """Gate a request, make the SDK call, record its response (or error) in the guard."""

    def __init__(self, guard: PruneGuard, conversation: str | None) -> None:
        self.guard = guard
        self.conversation = conversation

    def _body(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        options = {k: kwargs.pop(k) for k in SDK_OPTIONS if k in kwargs}
        gated = self.guard.gate(kwargs, conversation=self.conversation)
        return gated, options

    def _record(self, response: Any = None, error: BaseException | None = None) -> None:
        try:
            self.guard.record_response(response, error=error, conversation=self.conversation)
        except Exception as exc:  # noqa: BLE001 - recording never breaks the call
            log.warning("prunegate guard: could not record the response: %r", exc)

    def create(self, method: Callable[..., Any], api: str) -> Callable[..., Any]:
        """``method`` (a client's ``create``) gated; an async client's call is awaited in :meth:`_answer`."""
        @functools.wraps(method)
        def create(**kwargs: Any) -> Any:
            body, options = self._body(kwargs)
            try:
                out = method(**body, **options)
            except Exception as exc:
                self._record(error=exc)
                raise
            if inspect.isawaitable(out):  # AsyncAnthropic / AsyncOpenAI
                return self._answer(out, bool(body.get("stream")), api)
            if body.get("stream"):
                return _Stream(out, _Accumulator(api), self._record)
            self._record(out)
            return out
        return create

    async def _answer(self, pending: Any, stream: bool, api: str) -> Any:
        try:
            out = await pending
        except Exception as exc:
            self._record(error=exc)
            raise
        if stream:
            return _AsyncStream(out, _Accumulator(api), self._record)
        self._record(out)
        return out

    def stream_manager(self, method: Callable[..., Any]) -> Callable[..., Any]:
        """Anthropic's ``messages.stream(...)``: the manager's stream, recorded at exit from its snapshot."""
        @functools.wraps(method)
        def stream(**kwargs: Any) -> Any:
            body, options = self._body(kwargs)
            return _Manager(method(**body, **options), self._record)
        return stream


class _Accumulator:
    """What a stream of events said, as the response body it stands for."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.snapshot: Any = None
        self.final: Any = None
        if api == "chat":
            from openai.lib.streaming.chat._completions import ChatCompletionStreamState  # noqa: PLC0415

            self._chat = ChatCompletionStreamState()

    def add(self, event: Any) -> None:
        if self.api == "chat":
            self._chat.handle_chunk(event)
        elif self.api == "anthropic":
            self._anthropic(_plain(event))
        elif getattr(event, "type", None) in ("response.completed", "response.incomplete", "response.failed"):
            self.final = event.response

    def _anthropic(self, e: dict[str, Any]) -> None:
        """Anthropic's raw events folded into the message they carry (input JSON parsed at block stop)."""
        kind = e.get("type")
        if kind == "message_start":
            self.snapshot = dict(e["message"])
            self.snapshot["content"] = []
            self._json: dict[int, str] = {}
        elif kind == "content_block_start":
            self.snapshot["content"].append(dict(e["content_block"]))
        elif kind == "content_block_delta":
            block, delta = self.snapshot["content"][e["index"]], e["delta"]
            for key, into in (("text", "text"), ("thinking", "thinking"), ("signature", "signature")):
                if key in delta:
                    block[into] = block.get(into, "") + delta[key]
            if "partial_json" in delta:
                self._json[e["index"]] = self._json.get(e["index"], "") + delta["partial_json"]
        elif kind == "content_block_stop" and e["index"] in self._json:
            self.snapshot["content"][e["index"]]["input"] = json.loads(self._json.pop(e["index"]) or "{}")
        elif kind == "message_delta":
            self.snapshot.update({k: v for k, v in (e.get("delta") or {}).items() if v is not None})
            usage = {k: v for k, v in (e.get("usage") or {}).items() if v is not None}
            self.snapshot["usage"] = {**(self.snapshot.get("usage") or {}), **usage}

    def response(self) -> Any:
        if self.api == "chat":
            return self._chat.current_completion_snapshot
        return self.snapshot if self.api == "anthropic" else self.final


class _Stream:
    """A sync SDK stream, passed through event by event; recorded when it ends or is closed."""

    def __init__(self, stream: Any, acc: _Accumulator, record: Callable[..., None]) -> None:
        self._stream, self._acc, self._record, self._done = stream, acc, record, False

    def __iter__(self) -> Iterator[Any]:
        try:
            for event in self._stream:
                self._note(event)
                yield event
        except Exception as exc:
            self._finish(error=exc)
            raise
        self._finish()

    def _note(self, event: Any) -> None:
        try:
            self._acc.add(event)
        except Exception as exc:  # noqa: BLE001 - never breaks the stream
            log.warning("prunegate guard: could not follow the stream: %r", exc)

    def _finish(self, error: BaseException | None = None) -> None:
        if not self._done:
            self._done = True
            self._record(None if error else _safe(self._acc.response), error=error)

    def close(self) -> None:
        self._finish()
        self._stream.close()

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _AsyncStream(_Stream):
    """An async SDK stream, passed through event by event; recorded when it ends or is closed."""

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        try:
            async for event in self._stream:
                self._note(event)
                yield event
        except Exception as exc:
            self._finish(error=exc)
            raise
        self._finish()

    async def close(self) -> None:  # type: ignore[override] # the SDK's async stream closes with await
        self._finish()
        await self._stream.close()

    async def __aenter__(self) -> _AsyncStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _Manager:
    """Anthropic's ``MessageStreamManager`` (sync or async): records the stream's message at exit."""

    def __init__(self, manager: Any, record: Callable[..., None]) -> None:
        self._manager, self._record = manager, record
        self._stream: Any = None

    def __enter__(self) -> Any:
        self._stream = self._manager.__enter__()
        return self._stream

    def __exit__(self, *exc: Any) -> Any:
        self._done(exc[1])
        return self._manager.__exit__(*exc)

    async def __aenter__(self) -> Any:
        self._stream = await self._manager.__aenter__()
        return self._stream

    async def __aexit__(self, *exc: Any) -> Any:
        self._done(exc[1])
        return await self._manager.__aexit__(*exc)

    def _done(self, error: BaseException | None) -> None:
        if error is not None:
            self._record(error=error)
        else:
            self._record(_safe(lambda: self._stream.current_message_snapshot))


def _plain(event: Any) -> dict[str, Any]:
    dump = getattr(event, "model_dump", None)
    return dump() if callable(dump) else dict(event)


def _safe(get: Callable[[], Any]) -> Any:
    try:
        return get()
    except Exception as exc:  # noqa: BLE001 - an unfinished stream: recorded without a response
        log.warning("prunegate guard: the stream ended without a response to record: %r", exc)
        return None
