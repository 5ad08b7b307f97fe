"""Recorded content is data, never markup.

Streamlit's text elements (``st.text``, ``st.code``, ``st.json``, ``st.dataframe``) already show
strings literally; these helpers cover the two places where a recorded string could be read as
markup: Plotly labels and hover text (Plotly renders a subset of HTML tags there) and Markdown
(captions, labels). The dashboard never lets Streamlit render HTML (a test checks the sources).
"""

from __future__ import annotations

import html
import re
from typing import Any

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def esc(value: Any) -> str:
    """A value as text that Plotly shows literally (``<b>`` stays ``<b>``, not bold)."""
    if value is None:
        return ""
    return html.escape(str(value), quote=False)


def md(value: Any) -> str:
    """A value as Markdown that renders literally (every Markdown/HTML special character escaped)."""
    if value is None:
        return ""
    return _MD_SPECIAL.sub(r"\\\1", str(value)).replace("\n", " ")


def short(value: Any, limit: int = 80) -> str:
    """A one-line preview of a value, cut at ``limit`` characters."""
    text = "" if value is None else " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
