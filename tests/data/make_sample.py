"""Rebuild tests/data/traffic, the small sample of ../shared/traffic that the tests fall back to.

Run from the repository root with the full traffic beside it:
    .venv/bin/python tests/data/make_sample.py
The sample is every 20th τ-bench airline dialogue (10 of 200, records unchanged), the first 4 of
the 50 τ²-bench claude-opus-4-6 airline dialogues (records unchanged) and the
pydantic-ai cassettes except the two largest (kept byte for byte), with each source's LICENSE and
PROVENANCE.txt. Tests assert behaviour that holds on both the sample and the full traffic.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FULL = ROOT.parent / "shared" / "traffic"
SAMPLE = Path(__file__).resolve().parent / "traffic"
TAU = Path("tau-bench-gpt4o-airline")
CASSETTES = Path("pydantic-ai-cassettes")
TAU2 = Path("tau2-claude-opus-4-6-airline")
TAU2_FILE = "adaptive-agent_airline_claude-opus-4-6_1trial.json"
TAU_STEP = 20
TAU2_DIALOGUES = 4  # two training (even) and two held-out (odd) dialogues of the token calibration
LEFT_OUT = ("test_tool_search_eval[anthropic].yaml", "test_multiple_agents.yaml")  # 46 and 48 KB


def main() -> None:
    if not FULL.is_dir():
        raise SystemExit(f"{FULL}: not found (the full traffic must sit beside the repository)")
    shutil.rmtree(SAMPLE, ignore_errors=True)
    for source in (TAU, CASSETTES, TAU2):
        (SAMPLE / source).mkdir(parents=True)
        for name in ("LICENSE", "PROVENANCE.txt"):
            shutil.copyfile(FULL / source / name, SAMPLE / source / name)
    dialogues = json.loads((FULL / TAU / "gpt-4o-airline.json").read_text())[::TAU_STEP]
    # one dialogue a line: a valid JSON list that diffs by dialogue
    lines = ",\n".join(json.dumps(d, ensure_ascii=False) for d in dialogues)
    (SAMPLE / TAU / "gpt-4o-airline.json").write_text(f"[\n{lines}\n]\n")
    tau2 = json.loads((FULL / TAU2 / TAU2_FILE).read_text())[:TAU2_DIALOGUES]
    lines = ",\n".join(json.dumps(d, ensure_ascii=False) for d in tau2)
    (SAMPLE / TAU2 / TAU2_FILE).write_text(f"[\n{lines}\n]\n")
    for path in sorted((FULL / CASSETTES).rglob("*.yaml")):
        if path.name not in LEFT_OUT:
            out = SAMPLE / path.relative_to(FULL)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out)
    size = sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file())
    print(f"{SAMPLE}: {len(dialogues)} dialogues, {size // 1024} KB")


if __name__ == "__main__":
    main()
