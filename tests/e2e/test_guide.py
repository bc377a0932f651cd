"""docs/GUIDE.md's code runs as written: its Python blocks in order, its commands parse, its JSON loads.

The guide holds the examples that left the README (TensorFlow custom loops, collections and save
configurations, registering jobs from Python); an example that no test runs rots. Each Python block
runs in a fresh namespace in one working directory, in order, as the guide says; the checks below pin
what each block says it prints or leaves behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.markdown_blocks import REPO_ROOT, code_blocks, run_python_blocks, shell_commands

GUIDE = REPO_ROOT / "docs" / "GUIDE.md"


@pytest.fixture(scope="module")
def guide_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    work = tmp_path_factory.mktemp("guide")
    return work, run_python_blocks(GUIDE, work)


def _namespace_defining(namespaces: list[dict], name: str) -> dict:
    return next(ns for ns in namespaces if name in ns)


def test_the_tensorflow_custom_loop_saves_a_finished_trial(guide_run: tuple[Path, list[dict]]) -> None:
    from tornasole.trials import create_trial

    work, _ = guide_run
    assert (work / "runs/tf-loop/training_job_end.ts").exists()
    trial = create_trial(str(work / "runs/tf-loop"))
    assert trial.tensor_names(collection="gradients"), "wrap_tape saved no gradient"
    assert trial.has_tensor("batch_mean")


def test_the_collections_example_saves_what_it_says(guide_run: tuple[Path, list[dict]]) -> None:
    """TRAIN every 10 steps, EVAL every step (its printed comment); the activations' statistics only."""
    from tornasole import modes
    from tornasole.exceptions import TensorUnavailableForStep

    _, namespaces = guide_run
    ns = _namespace_defining(namespaces, "activations")
    trial = ns["trial"]
    assert trial.steps(mode=modes.TRAIN) == [0, 10, 20, 30]
    assert trial.steps(mode=modes.EVAL) == [0, 1, 2, 3]
    relu = ns["relu"]
    first = relu.steps()[0]
    assert relu.reduction_value(first, "max").item() > 0
    with pytest.raises(TensorUnavailableForStep):
        relu.value(first)


def test_the_analysis_block_reads_the_collections_trial(guide_run: tuple[Path, list[dict]]) -> None:
    from tornasole import modes

    _, namespaces = guide_run
    ns = _namespace_defining(namespaces, "weight")
    assert ns["loss"].steps(mode=modes.EVAL) == [0, 1, 2, 3]
    assert ns["trial"].tensor_names(collection="losses") == ["loss"]


def test_the_analysis_commands_run_on_that_trial(guide_run: tuple[Path, list[dict]]) -> None:
    work, _ = guide_run
    block = next(b for b in code_blocks(GUIDE, "bash") if "rule_invoker" in b)
    bin_dir = Path(sys.executable).parent
    for argv in shell_commands(block):
        exe = [sys.executable] if argv[0] == "python" else [str(bin_dir / argv[0])]
        proc = subprocess.run(exe + argv[1:], cwd=work, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_jobs_registered_from_python_are_in_progress(guide_run: tuple[Path, list[dict]]) -> None:
    _, namespaces = guide_run
    statuses = _namespace_defining(namespaces, "_job_statuses")["_job_statuses"]
    assert statuses == {"my-job": "InProgress", "other-job": "InProgress"}


def test_the_commands_it_shows_parse() -> None:
    """What the guide tells a user to type is a command the CLI accepts (the parser exits 2 on a wrong
    flag); its event pattern is JSON."""
    from tornasole.cli.main import build_parser

    commands = [
        argv
        for block in code_blocks(GUIDE, "bash")
        for argv in shell_commands(block)
        if argv[0] == "tornasole"
    ]
    assert len(commands) >= 3
    for argv in commands:
        build_parser().parse_args(argv[1:])  # SystemExit on an unknown command or flag
    patterns = [json.loads(block) for block in code_blocks(GUIDE, "json")]
    assert patterns
    assert all(p["source"] == ["tornasole"] for p in patterns)
