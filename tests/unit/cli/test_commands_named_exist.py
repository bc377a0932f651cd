"""Every ``tornasole <command>`` that the package tells a user to run exists in the CLI parser.

A message naming a command that does not exist (an alert once said "tornasole describe NAME")
leaves the user with an error on top of the problem. This scans the package's message strings
(every string literal that is not a docstring, f-strings included) and the commands quoted in
docstrings (````tornasole ...````), and checks each against the parser's commands and sub-commands.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import tornasole
from tornasole.cli.main import build_parser

PACKAGE = Path(tornasole.__file__).resolve().parent
MENTION = re.compile(r"(?<![\w./-])(?<!from )(?<!import )tornasole ([a-z][\w-]*)(?: ([a-z][\w-]*))?")
QUOTED = re.compile(r"``(tornasole [^`]+)``")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def mentions(source: str) -> list[tuple[str, str | None]]:
    """(command, sub-command or None) for each ``tornasole X [Y]`` a user is told about."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        texts = QUOTED.findall(node.value) if id(node) in docs else [node.value]
        for text in texts:
            found += [(m.group(1), m.group(2)) for m in MENTION.finditer(text)]
    return found


def _commands() -> dict[str, set[str]]:
    """Top-level command -> its sub-commands (empty for a command without any)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name, p in sub.choices.items():
        nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        out[name] = set(nested[0].choices) if nested else set()
    return out


def test_the_scan_sees_a_wrong_command() -> None:
    source = (
        'def f(name):\n    """Run ``tornasole jobs status NAME``."""\n'
        '    return f"run: tornasole describe {name}"\n'
    )
    assert mentions(source) == [("jobs", "status"), ("describe", None)]


def test_every_command_named_in_the_package_exists() -> None:
    commands = _commands()
    bad = []
    seen = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        for command, subcommand in mentions(path.read_text(encoding="utf-8")):
            seen += 1
            if command not in commands or (commands[command] and subcommand not in commands[command]):
                bad.append(f"{path.relative_to(PACKAGE)}: tornasole {command} {subcommand or ''}".rstrip())
    assert seen >= 5  # the scan found the package's own mentions (jobs status in alerts, local up, ...)
    assert not bad, bad


def test_alerts_point_at_an_existing_command() -> None:
    from tornasole.alerts import body

    source = Path(body.__file__).read_text(encoding="utf-8")
    assert {("jobs", "status"), ("jobs", "logs"), ("plot", None)} <= set(mentions(source))
