"""The examples in docs/gate.md run as written, in order, in one namespace."""

from __future__ import annotations

import re

from tests.paths import REPO

DOC = REPO / "docs" / "gate.md"


def test_the_examples_in_docs_gate_md_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 6
    namespace: dict = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{DOC.name}[python block {i}]", "exec"), namespace)  # noqa: S102
