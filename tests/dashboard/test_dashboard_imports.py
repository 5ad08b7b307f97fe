"""The dashboard reads and writes the store only through ``tracer.queries`` (and runs a compare
through the lab's public functions; span names come from ``tracer.contract``): no page or component imports the store, the spans, the
traffic wing or anything else of the tracer directly (CONTRIBUTING, issue #30)."""

from __future__ import annotations

import ast

from tests.paths import REPO

# tracer.contract: the span names (the contract, not a way into the store); tracer.lab: running a
# compare, its sweeps and recommendation
ALLOWED = ("tracer.queries", "tracer.contract", "tracer.lab")


def _tracer_imports() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted((REPO / "dashboard").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] if node.module != "tracer" else [f"tracer.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found += [(str(path.relative_to(REPO)), node.lineno, n) for n in names if n.split(".")[0] == "tracer"]
    return found


def test_the_dashboard_imports_only_queries_and_the_lab() -> None:
    imports = _tracer_imports()
    assert any(n == "tracer.queries" for _, _, n in imports)  # the check sees the imports at all
    around = [f"{p}:{line}: {n}" for p, line, n in imports
              if not any(n == a or n.startswith(a + ".") for a in ALLOWED)]
    assert around == [], "the dashboard reads around tracer.queries:\n" + "\n".join(around)


def test_no_page_draws_by_magic() -> None:
    """The server runs without Streamlit's "magic" (dashboard.__main__.DEFAULTS): a bare value on its
    own line of a page (or of the app) would be drawn by it and is silently not drawn without it."""
    bare = []
    for path in [REPO / "dashboard" / "app.py", *sorted((REPO / "dashboard" / "views").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            body = getattr(node, "body", None)  # a lambda's body is one expression
            for i, stmt in enumerate(body if isinstance(body, list) else []):
                if not isinstance(stmt, ast.Expr) or isinstance(stmt.value, ast.Call | ast.Await | ast.Yield):
                    continue
                if i == 0 and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                    continue  # a docstring
                bare.append(f"{path.relative_to(REPO)}:{stmt.lineno}")
    assert not bare, bare
