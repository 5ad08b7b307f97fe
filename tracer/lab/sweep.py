"""A sweep: every arm (policy × parameters × budget × gating) on the same sessions, each with its
interval, stored so that a later ``prunegate recommend`` (or the dashboard) can find it.

``prunegate compare`` runs one pass over the sessions (one import of content, shared event
streams per session: :func:`tracer.lab.compare.run_replays`) and hands the results here:
:func:`summarize` gives each arm its retention and cost per session, each with its 95% interval
over sessions (:mod:`tracer.lab.metrics`, the project's one interval method); :func:`record` adds what is needed to find and reproduce
the sweep (the sessions, the options, the ``prunegate compare`` command of every arm); and
:func:`save` writes it to ``<store>/sweeps/`` as one JSON file through the store
(:mod:`tracer.store.records`: whole or not at all, in a directory or a bucket).

The interval depends only on the per-session values, so an arm replayed alone (its reproducing
command) gets the interval it had in the sweep.
"""

from __future__ import annotations

import json
import os
import shlex
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tracer.lab import metrics
from tracer.lab.compare import Comparison
from tracer.lab.replay import ReplaySpec, SessionResult
from tracer.store import BucketURL, records

SWEEPS_DIR = records.COMPARISONS
NOT_A_TOOL = "(not a tool result)"


def parse_budgets(text: str) -> list[int | None]:
    """``"2000,4000,8000"`` → [2000, 4000, 8000]; ``auto`` is the default 60% of each session."""
    out: list[int | None] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            raise ValueError(f"--budget: an empty item in {text!r} (positive integers or auto, separated by commas)")
        if item == "auto":
            out.append(None)
            continue
        try:
            value = int(item.replace("_", ""))
        except ValueError:
            raise ValueError(f"--budget: expected positive integers separated by commas, got {item!r}") from None
        if value <= 0:
            raise ValueError(f"--budget: expected positive integers, got {item!r}")
        out.append(value)
    if not out:
        raise ValueError("--budget: no budget given")
    if len(set(out)) != len(out):
        raise ValueError(f"--budget: a budget is listed twice in {text!r}")
    return out


def _r(x: float | None, digits: int) -> float | None:
    return None if x is None or x != x else round(x, digits)


def _clip(x: float | None) -> float | None:
    """A retention bound within what a share can be (the t interval does not know it is one)."""
    return None if x is None else min(1.0, max(0.0, x))


def summarize(spec: ReplaySpec, results: Sequence[SessionResult]) -> dict[str, Any]:
    """One arm: retention, cost and tokens per session, each with its 95% interval over sessions
    (:func:`tracer.lab.metrics.interval`, the one method; retention bounds are clipped to [0, 1],
    sessions without references are left out of retention and sessions without a price out of
    cost); what was lost and to which tools; where each replay's first lost reference is."""
    ret = metrics.interval(r.retention for r in results)
    cost = metrics.interval(r.cost for r in results)
    tok = metrics.interval(float(r.tokens_sent) for r in results)
    refs = sum(r.references for r in results)
    kept = sum(r.retained for r in results)
    tools = Counter((x.tool or NOT_A_TOOL) for r in results for x in r.lost_references)
    return {
        "arm": spec.name, "policy": spec.policy, "params": dict(spec.params), "gated": spec.gated,
        "budget": spec.budget, "sessions": len(results), "level": metrics.LEVEL,
        "references": refs, "retained": kept, "retention_pooled": round(kept / refs, 4) if refs else None,
        "retention_sessions": ret.n, "retention": metrics.rounded(ret.mean),
        "retention_low": _clip(metrics.rounded(ret.low)), "retention_high": _clip(metrics.rounded(ret.high)),
        "priced_sessions": cost.n,
        "cost_per_session": _r(cost.mean, 6), "cost_low": _r(cost.low, 6), "cost_high": _r(cost.high, 6),
        "cost": round(sum(r.cost for r in results if r.cost is not None), 6) if cost.n else None,
        "tokens_per_session": _r(tok.mean, 1), "tokens_low": _r(tok.low, 1), "tokens_high": _r(tok.high, 1),
        "tokens_sent": sum(r.tokens_sent for r in results),
        "invalid_requests": sum(r.invalid_requests for r in results),
        "failures": sum(r.failures for r in results),
        "lost_references": sum(len(r.lost_references) for r in results),
        "lost_by_tool": dict(tools.most_common()),
        "replays": [{"source_id": r.source_id, "name": r.name, "replay_id": r.replay_id,
                     "first_lost_step": r.first_lost_step, "lost": len(r.lost_references)} for r in results],
    }


def pareto(arms: Sequence[dict[str, Any]], *, cost_key: str = "cost_per_session") -> list[bool]:
    """Which arms are Pareto-optimal among the safe ones: no other safe arm has at least their
    retention for at most their cost and is better on one of the two. An arm that sent an invalid
    request or had a failed session is not an option, so it is never optimal and dominates none;
    nor is an arm without retention or cost."""

    def usable(a: dict[str, Any]) -> bool:
        return (a.get("retention") is not None and a.get(cost_key) is not None
                and not a.get("invalid_requests") and not a.get("failures"))

    ok = [a for a in arms if usable(a)]
    out = []
    for a in arms:
        if not usable(a):
            out.append(False)
            continue
        ra, ca = a["retention"], a[cost_key]
        dominated = any(
            b is not a and b["retention"] >= ra and b[cost_key] <= ca and (b["retention"] > ra or b[cost_key] < ca)
            for b in ok)
        out.append(not dominated)
    return out


# ------------------------------------------------------------------------------------- the record
def policy_arg(spec: ReplaySpec) -> str:
    """The ``--policies`` item naming exactly this arm's policy and parameters."""
    parts = [spec.policy]
    for k, v in spec.params:
        parts.append(f"{k}={v if isinstance(v, str) else json.dumps(v)}")
    return "@".join(parts)


def compare_command(options: dict[str, Any], *, policies: str, budgets: Sequence[int | None],
                    gated: str) -> str:
    """The ``prunegate compare`` command line for these arms with the sweep's other options."""
    argv = ["prunegate", "compare", "--store", options["store"], "--policies", policies, "--gated", gated]
    if any(b is not None for b in budgets):
        argv += ["--budget", ",".join("auto" if b is None else str(b) for b in budgets)]
    for flag, key in (("--hard-ceiling", "hard_ceiling"), ("--seed", "seed"), ("--prices", "prices"),
                      ("--price-model", "price_model")):
        if options.get(key) is not None:
            argv += [flag, str(options[key])]
    if options.get("stream_results"):
        argv += ["--stream-results", str(options["stream_results"])]
    if options.get("session"):
        argv += ["--session", *options["session"]]
    return shlex.join(argv)


def arm_command(options: dict[str, Any], spec: ReplaySpec) -> str:
    """The command that replays this one arm on the same sessions with the same options."""
    return compare_command(options, policies=policy_arg(spec), budgets=[spec.budget],
                           gated="on" if spec.gated else "off")


def record(cmp: Comparison, *, options: dict[str, Any], sessions: Iterable[Any], prices: dict[str, Any],
           models: dict[str, int], policies: str, budgets: Sequence[int | None], gated: str) -> dict[str, Any]:
    """Everything a sweep found and what reproduces it, as JSON-ready data."""
    arms_ = [summarize(spec, rs) for spec, rs in zip(cmp.specs, cmp.results, strict=True)]
    for a, spec, optimal in zip(arms_, cmp.specs, pareto(arms_), strict=True):
        a["pareto"] = optimal
        a["command"] = arm_command(options, spec)
    command = compare_command(options, policies=policies, budgets=budgets, gated=gated)
    return {
        **records.stamp("sweep", command),  # id, kind, title, created, time_ns: an id that sorts by time
        "command": command,
        "options": options,
        "sessions": [{"id": c.session_id, "name": c.name, "model": c.model} for c in sessions],
        "prices": prices, "models": models,
        "arms": arms_, "rows": cmp.rows, "differences": cmp.differences,
    }


def run_sweep(store: Any, convs: Any, policies: Sequence[tuple[str, Any]], *, policies_text: str, gated: str,
              budgets: Sequence[int | None], hard_ceiling: int | None, stream_results: int, seed: int | None,
              workers: int, traced: bool, capture_content: bool, prices: Any, prices_path: str | None,
              price_model: str | None, sessions: list[str] | None, engine: str = "local",
              address: str | None = None, detail: str = "decisions") -> tuple[dict[str, Any], Path | str, list[str]]:
    """Run every arm over ``convs`` in one pass, record the sweep and store it in ``store``.

    Returns (the sweep's record, where it is stored, one line for each thing the figures leave out:
    sessions without a price). ``policies`` are parsed (:func:`tracer.lab.compare.parse_policies`);
    ``policies_text`` is how the user wrote them, for the reproducing command."""
    from tracer.lab.compare import compare, progress_bar

    result = compare(convs, list(policies), gated=gated, budget=list(budgets), hard_ceiling=hard_ceiling,
                     stream_results=stream_results, seed=seed, workers=workers,
                     store_path=store.path if traced else None, capture_content=capture_content,
                     progress=progress_bar(), prices=prices, price_model=price_model, engine=engine,
                     address=address, detail=detail)
    models = result.models
    used = {k for k in models if not k.startswith("(unpriced)")}
    options = {
        "store": str(store.path.resolve()), "session": sessions, "hard_ceiling": hard_ceiling,
        "stream_results": stream_results, "seed": seed, "prices": prices_path, "price_model": price_model,
        "traced": traced,
    }
    table = prices.to_dict()
    table["models"] = {k: v for k, v in table["models"].items() if k in used}
    rec = record(result, options=options, sessions=convs, prices=table, models=models, policies=policies_text,
                 budgets=budgets, gated=gated)
    warnings = [f"{models[key]} sessions have no price ({key.removeprefix('(unpriced) ')}); their cost is left out "
                "(set --price-model or add the model with --prices)" for key in models if key.startswith("(unpriced)")]
    return rec, save(store.path, rec), warnings


def save(store_path: str | os.PathLike[str] | BucketURL, rec: dict[str, Any]) -> Path | str:
    """Write the record into ``<store>/sweeps/<id>.json`` through the store
    (:func:`tracer.store.records.put_record`: whole or not at all, a directory or a bucket); where it is."""
    return records.put_record(store_path, SWEEPS_DIR, rec["id"], rec)


def list_sweeps(store_path: str | os.PathLike[str] | BucketURL) -> list[Path]:
    """The stored sweeps, oldest first (their names start with their UTC time to the nanosecond).
    A bucket's are copied into a local cache first (sweeps are immutable: each is fetched once)."""
    return records.record_paths(store_path, SWEEPS_DIR, "sweep-")


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """One stored sweep (ValueError naming the file when it is not one)."""
    try:
        data = records.read_record(path)
    except ValueError as exc:
        raise ValueError(f"sweep {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("arms"), list):
        raise ValueError(f"sweep {path}: not a prunegate sweep (no 'arms')")
    return data


def last_sweep(store_path: str | os.PathLike[str] | BucketURL) -> dict[str, Any] | None:
    """The most recent stored sweep of a store, or None."""
    paths = list_sweeps(store_path)
    return load(paths[-1]) if paths else None


__all__ = [
    "arm_command", "compare_command", "last_sweep", "list_sweeps", "load", "pareto", "parse_budgets",
    "policy_arg", "record", "run_sweep", "save", "summarize",
]
