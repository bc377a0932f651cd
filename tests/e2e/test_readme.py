"""The README's code runs as written: its Python blocks in order, its shell commands.

A README whose examples drift from the code is worse than none; this test
executes every Python block as written, each in a fresh namespace (a block a
reader pastes must run alone), and runs the shell commands of the analysis and
jobs sections (the jobs commands against the local mode). docs/GUIDE.md's blocks
are run the same way by test_guide.py; the rule table lives in docs/RULES.md
(tests/unit/test_docs.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.markdown_blocks import REPO_ROOT, code_blocks, run_python_blocks, shell_commands

README = REPO_ROOT / "README.md"
BIN = Path(sys.executable).parent


def _blocks(lang: str) -> list[str]:
    return code_blocks(README, lang)


_commands = shell_commands


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Run each Python block as pasted into a fresh interpreter: its own namespace, nothing given.

    The blocks share only the working directory (a later block reads the trial an earlier one
    wrote, as a reader following the README does); a name a block uses without defining it
    (``OUT``, ``np``, a model from another block) fails here. Returns the directory and the
    namespaces merged in order (for the checks below).
    """
    work = tmp_path_factory.mktemp("readme")
    merged: dict = {}
    for namespace in run_python_blocks(README, work):
        merged.update(namespace)
    return work, merged


def test_python_blocks_run_and_produce_a_trial(readme_run: tuple[Path, dict]) -> None:
    work, ns = readme_run
    assert (work / "runs/my-job/training_job_end.ts").exists()
    # 49: the loop's last save_scalar("lr"), at a step the interval skips but the last of its mode: written
    # at close, as smdebug 1.0.34 writes it (same steps, [0, 10, 20, 30, 40, 49], from smdebug on this loop)
    assert ns["trial"].steps() == [0, 10, 20, 30, 40, 49]
    assert ns["trial"].tensor("scalar/lr").steps() == [0, 10, 20, 30, 40, 49]


def test_every_hook_example_wrote_a_finished_trial(readme_run: tuple[Path, dict]) -> None:
    """One example per hook (PyTorch, Keras, XGBoost, numpy), each a trial a rule can read."""
    from tornasole.trials import create_trial

    work, _ = readme_run
    for run in ("my-job", "keras-job", "xgboost-job", "numpy-job"):
        assert (work / "runs" / run / "training_job_end.ts").exists(), run
    numpy_trial = create_trial(str(work / "runs/numpy-job"))
    assert numpy_trial.steps() == [0, 5, 10, 15]
    assert sorted(numpy_trial.tensor_names()) == ["loss", "weights/w"]


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
    report = (work / "report.html").read_text()
    # the PyTorch example profiles (profiler=True): the report has its profiler section as well
    for section in ('id="rule-verdicts"', 'id="loss-chart"', 'id="profiler"', 'id="phase-breakdown"'):
        assert section in report, section


def test_the_pytorch_example_wrote_profiler_files(readme_run: tuple[Path, dict]) -> None:
    from tornasole.profiler.format import paths, trace_events

    work, _ = readme_run
    root = work / "runs/my-job" / paths.PROFILER_DIR
    framework = [p for p in root.rglob("*.json") if paths.parse_framework_file_name(p.as_posix())]
    events = [e for p in framework for e in trace_events.decode_trace_file(p.read_text()).events]
    steps = {e.args.get("step_num") for e in events if e.phase == trace_events.step_phase("TRAIN")}
    assert len(steps) == 50
    assert {trace_events.FORWARD, trace_events.BACKWARD, trace_events.OPTIMIZER} <= {e.phase for e in events}


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


def test_the_migration_guide_is_linked_and_its_commands_parse() -> None:
    """docs/MIGRATION.md (the SageMaker route) is reachable from the README, and what it tells a user
    to type is a command the CLI accepts (its flags exist; the parser exits 2 on a wrong one)."""
    from tornasole.cli.main import build_parser

    assert "](docs/MIGRATION.md)" in README.read_text()
    migration = REPO_ROOT / "docs" / "MIGRATION.md"
    guide = migration.read_text()
    for needed in ("--from-request", "register_from_request", "smdebug_alias", "SMDEBUG_CONFIG_FILE_PATH"):
        assert needed in guide, needed
    blocks = code_blocks(migration, "bash")
    commands = [argv for block in blocks for argv in _commands(block) if argv[0] == "tornasole"]
    assert len(commands) >= 3
    for argv in commands:
        build_parser().parse_args(argv[1:])  # SystemExit on an unknown command or flag
