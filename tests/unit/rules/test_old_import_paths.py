"""Every public path from before ``rules/`` was housed by audience still imports the same objects.

The built-ins moved to ``tornasole.rules.builtin``, SageMaker's configuration dictionaries to
``tornasole.jobs.rule_configs``, the command's printing to ``tornasole.cli``; smdebug's paths
(``tornasole.rules.generic``, ``tornasole.rules.rule_invoker``) and the README's
(``from tornasole.rules import rule_configs``) answer with those very objects, not copies.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from tornasole.rules.registry import BUILTIN_RULES

BUILTIN = "tornasole.rules.builtin"

#: (old module, old attribute or None for the module itself, new module, new attribute or None)
OLD_PATHS = [
    ("tornasole.rules.rule_configs", None, "tornasole.jobs.rule_configs", None),
    ("tornasole.rules", "rule_configs", "tornasole.jobs.rule_configs", None),
    (
        "tornasole.rules.rule_configs",
        "vanishing_gradient",
        "tornasole.jobs.rule_configs",
        "vanishing_gradient",
    ),
    ("tornasole.rules.recommended", None, "tornasole.rules.builtin.recommended", None),
    ("tornasole.rules", "recommended_rules", "tornasole.rules.builtin.recommended", "recommended_rules"),
    ("tornasole.rules.rule_invoker", "invoke_rule", "tornasole.rules.step_loop", "invoke_rule"),
    ("tornasole.rules.rule_invoker", "main", "tornasole.cli.smdebug_invoker", "main"),
    ("tornasole.rules.rule_invoker", "result_line", "tornasole.cli.invoke_report", "result_line"),
    ("tornasole.rules", "invoke_rule", "tornasole.rules.step_loop", "invoke_rule"),
    ("tornasole.rules", "RuleOutcome", "tornasole.rules.outcome", "RuleOutcome"),
    ("tornasole.rules.generic.base", "BuiltinRule", "tornasole.rules.builtin.base", "BuiltinRule"),
    ("tornasole.rules.generic.losses", None, "tornasole.rules.builtin.losses", None),
    *[
        ("tornasole.rules.generic", rule, f"tornasole.rules.builtin.{mod}", rule)
        for rule, mod in BUILTIN_RULES.items()
    ],
    *[
        (f"tornasole.rules.generic.{mod}", rule, "tornasole.rules.builtin", rule)
        for rule, mod in BUILTIN_RULES.items()
    ],
]


def _resolve(module: str, attribute: str | None) -> object:
    found = importlib.import_module(module)
    return found if attribute is None else getattr(found, attribute)


@pytest.mark.parametrize(
    ("old", "old_attr", "new", "new_attr"), OLD_PATHS, ids=[f"{o}:{a}" for o, a, _, _ in OLD_PATHS]
)
def test_old_path_gives_the_moved_object(
    old: str, old_attr: str | None, new: str, new_attr: str | None
) -> None:
    assert _resolve(old, old_attr) is _resolve(new, new_attr)


def test_old_module_paths_import_first_in_a_fresh_process() -> None:
    """In a new interpreter, the old module path is the first thing imported (nothing warmed the aliases)."""
    code = (
        "import tornasole.rules.generic.dead_relu as old, tornasole.rules.builtin.dead_relu as new\n"
        "import tornasole.rules.rule_configs as old_rc, tornasole.jobs.rule_configs as new_rc\n"
        "assert old is new and old.__name__ == 'tornasole.rules.builtin.dead_relu', old\n"
        "assert old_rc is new_rc\n"
        "from tornasole.rules.generic import DeadRelu\n"
        "assert DeadRelu is new.DeadRelu\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_unknown_old_names_fail_as_before() -> None:
    with pytest.raises(ModuleNotFoundError, match=r"tornasole\.rules\.generic\.no_such_rule"):
        importlib.import_module("tornasole.rules.generic.no_such_rule")
    with pytest.raises(ImportError, match="NoSuchRule"):
        exec("from tornasole.rules.generic import NoSuchRule", {})
