"""The README's code runs as written: its Python blocks in order, its shell commands, its rule table.

A README whose examples drift from the code is worse than none; this test
executes the Python blocks (with ``OUT`` pointing at a local trial, and the
jobs block against the local mode), runs the shell commands of the analysis
section, and checks that the rule table lists exactly the registered rules.
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
    """Run the Python blocks in one namespace, in a fresh directory, as a notebook would."""
    import os

    work = tmp_path_factory.mktemp("readme")
    cwd = os.getcwd()
    os.chdir(work)
    namespace: dict = {"OUT": "runs/my-job"}
    try:
        blocks = _blocks("python")
        jobs_block = next(b for b in blocks if "register_job(" in b)
        for block in blocks:
            if block is jobs_block:
                from tornasole.local import LocalMode, LocalSettings

                with LocalMode(LocalSettings(port=0)):
                    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
                    namespace["jobs_status"] = namespace["describe"]("my-job")["TrainingJobStatus"]
            else:
                exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    finally:
        os.chdir(cwd)
    return work, namespace


def test_python_blocks_run_and_produce_a_trial(readme_run: tuple[Path, dict]) -> None:
    work, ns = readme_run
    assert (work / "runs/my-job/training_job_end.ts").exists()
    assert ns["trial"].steps() == [0, 10, 20, 30, 40]
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
    assert proc.stdout.strip().splitlines()[-1] == (
        f"RESULT rule={rule} status=NoIssuesFound first_step=none fired_steps=none "
        "steps_evaluated=5 steps_skipped=0"
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
