"""Every command's ``--help`` renders, as a user asks for it, and every command is written one way.

``prunegate <command> --help`` runs as a process (what a user types); the command's parser and the
top-level parser with that command registered both format without error (argparse %-formats help
text, so an unescaped ``%`` in a summary only fails when it is shown); and every command's parser
was made by :func:`tracer.cli.add_command`, so its summary is the one in the command table.
"""

from __future__ import annotations

import argparse
import ast

import pytest

from tests.paths import REPO
from tests.servers import run_prunegate
from tracer.cli import COMMANDS, build_parser

CLI = REPO / "tracer" / "cli"


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_help_renders_as_a_process(name: str) -> None:
    run = run_prunegate(name, "--help", timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"usage: prunegate {name}")
    assert run.stderr == ""


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_top_level_help_renders_with_each_command_registered(name: str) -> None:
    parser = build_parser(name)
    text = parser.format_help()  # expands every command's summary, the registered one's too
    assert all(other in text for other in COMMANDS)
    sub = _subparsers(parser)
    registered = sub.choices[name]
    assert registered.format_help().startswith(f"usage: prunegate {name}")
    [choice] = [c for c in sub._choices_actions if c.dest == name]
    assert choice.help is not None and choice.help.replace("%%", "%") == COMMANDS[name].summary


def _command_modules() -> dict[str, ast.Module]:
    return {info.module.rsplit(".", 1)[1]: ast.parse((CLI / f"{info.module.rsplit('.', 1)[1]}.py").read_text())
            for info in COMMANDS.values()}


def test_every_command_is_written_one_way() -> None:
    """add_command makes the parser (no sub.add_parser), no literal exit status is returned, no
    SystemExit is raised, and no command module imports another command module."""
    commands = {info.module for info in COMMANDS.values()}
    bad = []
    for stem, tree in _command_modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_parser":
                bad.append(f"{stem}.py:{node.lineno}: add_parser instead of add_command")
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and type(node.value.value) is int:
                bad.append(f"{stem}.py:{node.lineno}: a literal exit status ({node.value.value}); use tracer.cli.status")
            if isinstance(node, ast.Raise) and node.exc is not None and "SystemExit" in ast.unparse(node.exc):
                bad.append(f"{stem}.py:{node.lineno}: SystemExit for control flow; raise CommandError")
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                hit = [n for n in names if n in commands and n != f"tracer.cli.{stem}"]
                if hit:
                    bad.append(f"{stem}.py:{node.lineno}: imports the command module {hit[0]}")
    assert bad == []


def test_shared_options_are_declared_once() -> None:
    """An option several commands take is written out once, in options.py."""
    seen: dict[str, list[str]] = {}
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                        seen.setdefault(arg.value, []).append(path.name)
    twice = {flag: files for flag, files in seen.items() if len(set(files)) > 1}
    assert twice == {}
    for flag in ("--store", "--json", "--host", "--port", "--otlp-endpoint", "--prices"):
        assert seen.get(flag) == ["options.py"], flag  # and once there
