"""Span names and attribute keys are defined once (tracer/contract/names.py) and documented (docs/spans.md)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.paths import REPO
from tracer.contract import names

PACKAGES = ("policies", "tracer", "dashboard")
NAMES_MODULE = REPO / "tracer" / "contract" / "names.py"
# "prunegate."-prefixed literals that are neither span names nor attribute keys, with the reason.
NOT_SPAN_NAMES = {
    ("policies/registry.py", "prunegate.policies"),  # the entry-point group third-party policies register in
    ("tracer/store/schema.py", "prunegate.schema_version"),  # Parquet file metadata of a segment
    ("policies/adapters/_native.py", "prunegate.adapters"),  # a logger's name (policies never imports the tracer)
}
LITERAL = re.compile(r"""[bfrBFR]{0,2}(['"])((?:prunegate|gen_ai)\.[^'"]*)""")
# a name in the docs; ``prunegate.replay.<metric>`` is a pattern whose names are listed beside it
DOC_NAME = re.compile(r"(?<![\w.])((?:prunegate|gen_ai)\.[a-z_]+(?:\.[a-z_]+)*)(?!\w|\.[\w<])")


def stray_literals() -> list[str]:
    """``"prunegate.…"`` and ``"gen_ai.…"`` literals (quoted, in code or SQL) outside names.py and the allow-list."""
    out = []
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            if path == NAMES_MODULE:
                continue
            rel = path.relative_to(REPO).as_posix()
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for m in LITERAL.finditer(line):
                    if (rel, m.group(2)) not in NOT_SPAN_NAMES:
                        out.append(f"{rel}:{lineno}: {line.strip()}")
    return out


def test_no_span_name_or_attribute_literal_outside_names_module() -> None:
    stray = stray_literals()
    assert not stray, "use tracer.contract.names instead of these literals:\n" + "\n".join(stray)


def test_no_constant_is_quoted_as_text_in_python_code() -> None:
    """``v.get('{sn.POLICY}')`` inside an f-string looks the text up, not the key: a silent miss."""
    bad = re.compile(r"""\.\w+\((['"])\{sn\.""")
    found = [f"{p.relative_to(REPO)}:{n}" for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if bad.search(line)]
    assert not found


def test_the_check_finds_a_literal(tmp_path: Path) -> None:
    """The pattern catches the shapes a literal takes: a Python string, SQL, an f-string prefix."""
    lines = ['x = {"prunegate.policy": 1}', "sql = \"SELECT attributes->>'prunegate.policy'\"",
             'key = f"prunegate.shadow.{name}.ids"', 'j."prunegate.gated"', "a.get('gen_ai.request.model')",
             "attributes->>'gen_ai.operation.name'"]
    assert all(LITERAL.search(line) for line in lines)
    assert not LITERAL.search("``prunegate.session`` in a docstring, sn.POLICY")


def test_names_are_unique_and_prefixed() -> None:
    keys = names.attribute_keys()
    spans = names.span_names()
    assert len(set(spans)) == len(spans)
    assert not set(keys) & set(spans)
    assert all(s.startswith(names.PREFIX) for s in spans)
    values = [v for k, v in vars(names).items() if k.isupper() and isinstance(v, str) and "." in v]
    dupes = {v for v in values if values.count(v) > 1}
    assert not dupes, f"defined twice in names.py: {sorted(dupes)}"


def documented() -> set[str]:
    return set(DOC_NAME.findall((REPO / "docs" / "spans.md").read_text(encoding="utf-8")))


def test_every_name_is_documented() -> None:
    """prunegate's names, the GenAI keys and the general OTel keys (``error.type``...) alike."""
    text = (REPO / "docs" / "spans.md").read_text(encoding="utf-8")
    defined = set(names.span_names()) | set(names.attribute_keys())
    missing = sorted(k for k in defined if not re.search(rf"(?<![\w.]){re.escape(k)}(?!\.?\w)", text))
    assert not missing, f"in tracer/contract/names.py but not in docs/spans.md: {missing}"


def test_every_documented_name_is_defined() -> None:
    """Every ``prunegate.*`` and ``gen_ai.*`` name the contract lists is a constant of names.py."""
    defined = set(names.span_names()) | set(names.attribute_keys())
    unknown = sorted(documented() - defined)
    assert not unknown, f"in docs/spans.md but not in tracer/contract/names.py: {unknown}"


def test_traced_sessions_emit_only_defined_names() -> None:
    """Every span name and attribute key real traced sessions write is one of names.py's."""
    from policies import Context, Gate
    from policies.naive import NaiveRuntime
    from tests.invariants import Scripted
    from tests.otel_memory import Recorder
    from tests.scenarios import history, parallel_batch, result
    from tracer.spans import SessionConfig, SpanObserver, TracedSession

    rec = Recorder()
    gated = TracedSession(rec.provider, SessionConfig(source="synthetic", policy="scripted", budget=100, capture_content=True))
    ctx = Context(observer=SpanObserver(gated), session_id=gated.session_id)
    history(ctx, turns=2)
    Gate(Scripted(ctx.messages[2].id), budget=100).check(ctx)
    gated.chat("m", seq=ctx.seq).response({"id": "r1", "model": "m", "usage": {"input_tokens": 3, "output_tokens": 4},
                                           "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"})
    gated.chat("m", seq=ctx.seq).error("overloaded", status_code=529, error_type="overloaded_error")
    with gated.tool("get_weather", "call_1", arguments={"city": "Lisbon"}, seq=ctx.seq):
        pass
    gated.end()

    naive = TracedSession(rec.provider, SessionConfig(source="synthetic", gated=False, capture_content=True))
    ctx = Context(observer=SpanObserver(naive), strict=False, session_id=naive.session_id)
    history(ctx, turns=1)
    batch = parallel_batch(ctx)
    for cid in ("call_weather", "call_hotel", "call_book"):
        ctx.append(result(cid, "ok"))
    NaiveRuntime(Scripted(batch.id), budget=10).check(ctx)
    assert naive.check_request(ctx.render("anthropic"), "anthropic", seq=ctx.seq)
    naive.end()

    emitted = {s.name for s in rec.spans}
    assert {names.SESSION, names.MESSAGE, names.UNIT_CLOSE, names.BUDGET_CHECK, names.PRUNE,
            names.VIOLATION} <= emitted
    defined = set(names.attribute_keys())
    for span in rec.spans:
        assert span.name in names.span_names() or span.name.startswith(("chat ", "execute_tool ")), span.name
        assert set(span.attributes or {}) <= defined, (span.name, set(span.attributes or {}) - defined)
        for link in span.links:
            assert set(link.attributes or {}) <= defined


def test_replay_metric_attributes_are_defined() -> None:
    """The replay's per-metric root attributes (tracer.lab.metrics) are constants of names.py."""
    from tracer.lab import metrics

    keys = {metrics.attribute(n) for n in (*metrics.NAMES, *metrics.RECORDED_EXTRA)}
    assert keys <= set(names.attribute_keys()), sorted(keys - set(names.attribute_keys()))
