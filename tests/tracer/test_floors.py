"""The tracer's floors: every import of every module (module level or inside a function) points down.

The ground floor (``tracer.contract`` with ``tracer.errors`` and ``tracer._lazy``) imports no wing;
the store stands on it with pyarrow and duckdb only; each wing above imports only wings below it
(DESIGN.md, "Inside tracer/"), so no arrow climbs back and no two wings form a circle. A new import
that breaks this fails here with the file, the line and the arrow.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

TRACER = REPO / "tracer"
SHIM = "an old import path"  # tracer/<old>.py: warns and re-exports through tracer._moved, nothing else
GROUND = {"contract", "errors", "_lazy", "_moved"}
# each wing: the tracer wings it may import (the ground floor is open to every wing but itself)
BELOW: dict[str, set[str]] = {
    "contract": set(),
    "errors": set(),
    "_lazy": set(),
    "_moved": set(),  # the old import paths' helper: it names where things live now as strings
    "store": GROUND,
    "spans": GROUND | {"store"},
    "guard": GROUND | {"store", "spans"},
    "traffic": GROUND | {"store", "spans"},
    "lab": GROUND | {"store", "spans", "traffic"},
    "wire": GROUND | {"store", "spans", "traffic"},
    "queries": GROUND | {"store", "spans", "traffic", "lab"},
    "cli": GROUND | {"store", "spans", "guard", "traffic", "lab", "wire", "queries", "__init__"},
    "__init__": GROUND | {"store", "spans", "guard"},  # the package's lazy surface (tracer/__init__.py)
    SHIM: {"_moved"},
}
# third-party packages a floor may import (anything else it imports must be the standard library)
OUTSIDE: dict[str, set[str]] = {
    "contract": set(),
    "errors": {"policies"},  # PrunegateError, the one root of every error (policies is below the tracer)
    "_lazy": set(),
    "_moved": set(),
    "store": {"pyarrow", "duckdb", "orjson", "boto3", "botocore"},  # orjson: optional speed-up; boto3: the s3 extra
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every absolute import in the file, wherever it stands."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def _wing(path: Path) -> str:
    parts = path.relative_to(TRACER).parts
    if len(parts) > 1:
        return parts[0]
    stem = Path(parts[0]).stem
    return stem if stem in BELOW else SHIM


def _broken() -> list[str]:
    bad = []
    for path in sorted(TRACER.rglob("*.py")):
        wing = _wing(path)
        assert wing in BELOW, f"{path.relative_to(REPO)}: wing {wing!r} has no floor in this test (add it)"
        for line, module in _imports(path):
            top, _, rest = module.partition(".")
            where = f"{path.relative_to(REPO)}:{line}"
            if top == "tracer":
                target = rest.partition(".")[0] or "__init__"
                if target != wing and target not in BELOW[wing]:
                    bad.append(f"{where}: {wing} -> {target} ({module})")
            elif top == "dashboard":
                bad.append(f"{where}: the tracer imports the dashboard ({module})")
            elif wing in OUTSIDE and top not in sys.stdlib_module_names and top not in OUTSIDE[wing]:
                bad.append(f"{where}: {wing} imports {top}, which its floor does not allow")
    return bad


def test_every_import_points_down_a_floor() -> None:
    assert _broken() == []


def test_the_floors_have_no_circle() -> None:
    """The allowed arrows themselves form no circle (a wing below never lists one above)."""
    order: list[str] = []
    left = dict(BELOW)
    while left:
        ready = [w for w, deps in left.items() if deps - {w} <= set(order)]
        assert ready, f"a circle among {sorted(left)}"
        order += sorted(ready)
        for w in ready:
            del left[w]


def test_the_check_catches_an_arrow_climbing_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test can fail: a store module importing the spans wing, inside a function, is reported."""
    fake = tmp_path / "tracer"
    (fake / "store").mkdir(parents=True)
    (fake / "store" / "x.py").write_text("def f():\n    from tracer.spans import observer\n    import opentelemetry\n")
    monkeypatch.setattr(sys.modules[__name__], "TRACER", fake)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert _broken() == ["tracer/store/x.py:2: store -> spans (tracer.spans)",
                         "tracer/store/x.py:3: store imports opentelemetry, which its floor does not allow"]


def test_the_store_and_the_contract_load_without_opentelemetry() -> None:
    """Converting span records needs no OpenTelemetry: the record's shape comes from the contract."""
    code = ("import sys, tracer.contract, tracer.contract.names, tracer.contract.settings, tracer.store.rows, "
            "tracer.store.sink, tracer.store.reader; print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


SQL_ON_SPANS = re.compile(r"\b(?:FROM|JOIN)\s+(?:spans|span_events|sessions)\b")


def test_sql_on_spans_only_in_the_queries_and_the_store() -> None:
    """Reads of the store's views are written in ``tracer/queries/`` (what is shown) or ``tracer/store/``
    (what writers and the exporter must know); every other module calls them."""
    found = []
    for top in ("tracer", "dashboard", "policies"):
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO)
            if rel.parts[:2] in (("tracer", "queries"), ("tracer", "store")):
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if SQL_ON_SPANS.search(line):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []


def arrows() -> dict[tuple[str, str], int]:
    """(wing, wing it imports) -> how many import statements make that arrow (shims left out)."""
    out: dict[tuple[str, str], int] = {}
    for path in sorted(TRACER.rglob("*.py")):
        wing = _wing(path)
        if wing == SHIM:
            continue
        for _, module in _imports(path):
            top, _, rest = module.partition(".")
            target = rest.partition(".")[0] or "__init__"
            if top == "tracer" and target != wing:
                out[(wing, target)] = out.get((wing, target), 0) + 1
    return out


def test_every_arrow_in_the_code_is_an_allowed_one() -> None:
    """The figures CONTRIBUTING's map gives come from these arrows: each points down a floor."""
    found = arrows()
    assert found and all(target in BELOW[wing] for wing, target in found)


def floor_arrows() -> dict[tuple[str, str], int]:
    """:func:`arrows` with the ground floor as one room (``contract`` with ``errors``, ``_lazy``, ``_moved``)
    and the package's own surface (``tracer/__init__.py``) as ``tracer``."""
    def room(w: str) -> str:
        return "contract" if w in GROUND else "tracer" if w == "__init__" else w

    out: dict[tuple[str, str], int] = {}
    for (wing, target), n in arrows().items():
        key = (room(wing), room(target))
        if key[0] != key[1]:
            out[key] = out.get(key, 0) + n
    return out


if __name__ == "__main__":  # python -m tests.tracer.test_floors: the figures of CONTRIBUTING's map
    found = floor_arrows()
    rooms = sorted({w for pair in found for w in pair})
    print(f"{len(rooms)} rooms ({', '.join(rooms)}), {len(found)} arrows ({sum(found.values())} import lines), "
          f"{len(_broken())} imports against the floors")
    for (wing, target), n in sorted(found.items()):
        print(f"  {wing} -> {target}: {n}")
