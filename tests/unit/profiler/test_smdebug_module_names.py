"""smdebug's profiler module names resolve to Tornasole's, for rule files and under the alias alike."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tornasole.compat.alias import target_module_name
from tornasole.profiler.smdebug_modules import PROFILER_READING_MODULES
from tornasole.rules.loader import load_rule_class, map_module_name


@pytest.mark.parametrize("name", sorted(PROFILER_READING_MODULES))
def test_every_mapped_module_imports_and_both_resolvers_agree(name: str) -> None:
    target = PROFILER_READING_MODULES[name]
    assert map_module_name(name) == target_module_name(name) == target
    importlib.import_module(target)


def test_a_rule_file_importing_smdebugs_profiler_readers_gets_ours(tmp_path: Path) -> None:
    rule = tmp_path / "profiler_rule.py"
    rule.write_text(
        "from smdebug.rules.rule import Rule\n"
        "from smdebug.profiler.system_metrics_reader import S3SystemMetricsReader\n"
        "from smdebug.profiler.utils import TimeUnits\n"
        "from smdebug.trials.profiler_trial import ProfilerTrial\n"
        "class UsesReaders(Rule):\n"
        "    readers = (S3SystemMetricsReader, TimeUnits, ProfilerTrial)\n"
        "    def invoke_at_step(self, step):\n"
        "        return False\n"
    )
    from tornasole.profiler.analysis import ProfilerTrial
    from tornasole.profiler.readers import S3SystemMetricsReader, TimeUnits

    cls = load_rule_class(str(rule), "UsesReaders")
    assert cls.readers == (S3SystemMetricsReader, TimeUnits, ProfilerTrial)
