"""Rules CONTRIBUTING gives the source that a linter does not check: every ``# type: ignore`` names
its error code and says why on the same line."""

from __future__ import annotations

import re

from tests.paths import REPO

SOURCES = ("policies", "tracer", "dashboard", "bench", "examples", "scripts")
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<code>\[[^\]]*\])?(?P<rest>.*)$")


def bare_ignores() -> list[str]:
    out = []
    for top in SOURCES:
        for path in sorted((REPO / top).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = IGNORE.search(line)
                if m and (not m.group("code") or not re.search(r"\w", m.group("rest"))):
                    out.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    return out


def test_every_type_ignore_has_a_code_and_a_reason() -> None:
    assert bare_ignores() == []


def test_the_rule_catches_a_bare_ignore() -> None:
    assert IGNORE.search("x = f()  # type: ignore[arg-type]").group("rest").strip() == ""
    assert not IGNORE.search("x = f()  # type: ignore").group("code")
    assert IGNORE.search("x = f()  # type: ignore[misc]  # why").group("rest").strip() == "# why"
