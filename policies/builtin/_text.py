"""Small text helpers the built-in policies share: words, salient terms, previews, the trim goal."""

from __future__ import annotations

import re

from ..messages import TOOL_RESULT, TOOL_USE, Message
from ..policy import ContextView

_WORD = re.compile(r"\w+", re.UNICODE)
_TERM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-.@]*[A-Za-z0-9]")
STOPWORDS = frozenset(
    "a an and are as at be but by can could do does for from had has have how i if in into is it its "
    "me my no not of on or our please so that the their then there these they this to was we were what "
    "when which will with would you your".split()
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens without stopwords and one-letter words: what lexical scorers compare."""
    return [w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in STOPWORDS]


def salient_terms(text: str, *, lower: bool = True) -> set[str]:
    """Identifier-like terms a later message could refer back to.

    Ids, numbers, codes and handles: a term with a digit (``HAT170``, ``$1,234`` gives ``1,234`` parts,
    ``2024-05-20``), with an underscore (``mia_li_3668``), an email, or an all-caps code of five or
    more characters (``ZFA04Y``, ``LAXSFO``). Ordinary words are not references. Lower-cased for
    matching unless ``lower`` is false.
    """
    out: set[str] = set()
    for term in _TERM.findall(text):
        if len(term) < 3:
            continue
        if any(c.isdigit() for c in term) or "_" in term or "@" in term or (len(term) >= 5 and term.isupper()):
            out.add(term.lower() if lower else term)
    return out


def preview(text: str, chars: int) -> str:
    """The first ``chars`` characters with whitespace collapsed, and an ellipsis when cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: max(0, chars - 1)].rstrip() + "…"


def message_kind(message: Message) -> str:
    """``tool_call``, ``tool_result``, ``summary`` or ``text``: what a scorer weighs a message as."""
    if any(b.type == TOOL_RESULT for b in message.blocks) or message.answered_ids:
        return "tool_result"
    if any(b.type == TOOL_USE for b in message.blocks) or message.call_ids:
        return "tool_call"
    return "text"


def tool_names(view: ContextView) -> dict[str, str]:
    """Tool call id -> tool name, from the calls in the context."""
    out: dict[str, str] = {}
    for m in view.messages():
        for b in m.blocks:
            if b.call_id is not None and b.name:
                out[b.call_id] = b.name
    return out


def rewritten(new: Message, changed: bool) -> Message | None:
    """A rewritten copy as a proposal carries it: None when nothing changed; a message whose content
    was absent now has some (a placeholder), so it is sent as a string."""
    if not changed:
        return None
    if new.form == "absent":
        new.form = "str"
    return new


def goal(view: ContextView, target: float) -> int:
    """Tokens to free so the context ends at ``target`` × budget (the gate's budget is the trigger)."""
    return view.tokens - int(view.budget * target)
