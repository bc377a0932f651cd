"""The README's code runs as written: its Python blocks in order, its shell commands, its rule table.

A README whose examples drift from the code is worse than none; this test
executes every Python block as written, each in a fresh namespace (a block a
reader pastes must run alone; the jobs block against the local mode), runs
the shell commands of the analysis section, and checks that the rule table
lists exactly the registered rules.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BIN = Path(sys.executable).parent


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def _commands(block: str) -> list[list[str]]:
    joined = block.replace("\\\n", " ")
    lines = [line.split("#", 1)[0].strip() for line in joined.splitlines()]
    return [shlex.split(line) for line in lines if line]


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Run each Python block as pasted into a fresh interpreter: its own namespace, nothing given.

    The blocks share only the working directory (a later block reads the trial an earlier one
    wrote, as a reader following the README does); a name a block uses without defining it
    (``OUT``, ``np``, a model from another block) fails here. Returns the directory and the
    namespaces merged in order (for the checks below).
    """
    import os

    work = tmp_path_factory.mktemp("readme")
    cwd = os.getcwd()
    os.chdir(work)
    merged: dict = {}
    try:
        for number, block in enumerate(_blocks("python"), 1):
            namespace: dict = {"__name__": "__main__"}
            code = compile(block, f"README.md python block {number}", "exec")
            if "register_job(" in block:
                from tornasole.local import LocalMode, LocalSettings

                with LocalMode(LocalSettings(port=0)):
                    exec(code, namespace)  # noqa: S102 - the README's own code
                    merged["jobs_status"] = namespace["describe"]("my-job")["TrainingJobStatus"]
            else:
                exec(code, namespace)  # noqa: S102
            merged.update(namespace)
    finally:
        os.chdir(cwd)
    return work, merged


def test_python_blocks_run_and_produce_a_trial(readme_run: tuple[Path, dict]) -> None:
    work, ns = readme_run
    assert (work / "runs/my-job/training_job_end.ts").exists()
    # 49: the loop's last save_scalar("lr"), at a step the interval skips but the last of its mode: written
    # at close, as smdebug 1.0.34 writes it (same steps, [0, 10, 20, 30, 40, 49], from smdebug on this loop)
    assert ns["trial"].steps() == [0, 10, 20, 30, 40, 49]
    assert ns["trial"].tensor("scalar/lr").steps() == [0, 10, 20, 30, 40, 49]
    assert ns["jobs_status"] == "InProgress"


@pytest.mark.parametrize("rule", ["LossNotDecreasing", "VanishingGradient", "ExplodingTensor"])
def test_the_readme_training_is_healthy(readme_run: tuple[Path, dict], rule: str) -> None:
    """The README's example learns: a newcomer's first run must not report a problem."""
    work, _ = readme_run
    proc = subprocess.run(
        [str(BIN / "tornasole"), "invoke", "runs/my-job", "--rule", rule],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    # six steps: 0-40 and 49, where only the loop's last scalar/lr was saved (ExplodingTensor reads it,
    # LossNotDecreasing looks for a loss there, VanishingGradient finds no gradient and skips it)
    evaluated, skipped = {"VanishingGradient": (5, 1)}.get(rule, (6, 0))
    assert proc.stdout.strip().splitlines()[-1] == (
        f"RESULT rule={rule} status=NoIssuesFound first_step=none fired_steps=none "
        f"steps_evaluated={evaluated} steps_skipped={skipped}"
    )


def test_the_readme_loss_decreases(readme_run: tuple[Path, dict]) -> None:
    _, ns = readme_run
    loss = ns["trial"].tensor("CrossEntropyLoss_output_0")
    values = [float(loss.value(step)) for step in loss.steps()]
    assert len(values) == 5
    assert all(b < a for a, b in zip(values, values[1:])), values


def test_analysis_commands_run(readme_run: tuple[Path, dict]) -> None:
    work, _ = readme_run
    block = next(b for b in _blocks("bash") if "tornasole trial summary" in b)
    for argv in _commands(block):
        exe = [sys.executable] if argv[0] == "python" else [str(BIN / argv[0])]
        proc = subprocess.run(exe + argv[1:], cwd=work, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert (work / "run.png").read_bytes()[:4] == b"\x89PNG"


def test_jobs_commands_run_against_the_local_mode(tmp_path: Path) -> None:
    from tornasole.local import LocalMode, LocalSettings

    block = next(b for b in _blocks("bash") if "tornasole jobs register" in b)
    commands = [c for c in _commands(block) if c[:3] != ["tornasole", "local", "up"]]
    with LocalMode(LocalSettings(port=0)):
        for argv in commands:
            argv = [a for a in argv if a != "--watch"]  # the job never ends here; --watch would wait for it
            exe = str(BIN / argv[0])
            proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
    assert "my-job" in proc.stdout


def test_rule_table_lists_exactly_the_registered_rules() -> None:
    from tornasole.rules import rule_names

    table = README.read_text().split("## Built-in rules", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"^\| (\w+) \|", table, flags=re.M)
    assert sorted(n for n in names if n != "rule") == sorted(rule_names())


def test_the_migration_guide_is_linked_and_its_commands_parse() -> None:
    """docs/MIGRATION.md (the SageMaker route) is reachable from the README, and what it tells a user
    to type is a command the CLI accepts (its flags exist; the parser exits 2 on a wrong one)."""
    from tornasole.cli.main import build_parser

    assert "](docs/MIGRATION.md)" in README.read_text()
    guide = (README.parent / "docs" / "MIGRATION.md").read_text()
    for needed in ("--from-request", "register_from_request", "smdebug_alias", "SMDEBUG_CONFIG_FILE_PATH"):
        assert needed in guide, needed
    blocks = re.findall(r"```bash\n(.*?)```", guide, flags=re.S)
    commands = [argv for block in blocks for argv in _commands(block) if argv[0] == "tornasole"]
    assert len(commands) >= 3
    for argv in commands:
        build_parser().parse_args(argv[1:])  # SystemExit on an unknown command or flag
