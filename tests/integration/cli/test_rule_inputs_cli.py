"""Issue #28 part 2 through the CLI on moto: rules that cannot run say so at registration, a rule that
read nothing is ``NothingEvaluated`` (not an issue for ``--fail-on-issues``), and the recommended set's
``UnchangedWeights`` is accepted wherever ``jobs status`` shows it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tornasole import Hook, SaveConfig
from tornasole.cli.main import main


@pytest.fixture
def stack(moto_local_resources: None) -> None:
    """The jobs API's resources in moto (``moto_local_resources``)."""


def _request(tmp_path: Path, collections: list[dict]) -> str:
    request = {
        "TrainingJobName": "sm-job",
        "DebugHookConfig": {"S3OutputPath": "s3://trials/out", "CollectionConfigurations": collections},
        "DebugRuleConfigurations": [
            {
                "RuleConfigurationName": "VanishingGradient",
                "RuleParameters": {"rule_to_invoke": "VanishingGradient"},
            },
            {"RuleConfigurationName": "DeadRelu", "RuleParameters": {"rule_to_invoke": "DeadRelu"}},
            {
                "RuleConfigurationName": "UnchangedWeights",
                "RuleParameters": {"rule_to_invoke": "UnchangedWeights"},
            },
            {
                "RuleConfigurationName": "LossNotDecreasing",
                "RuleParameters": {"rule_to_invoke": "LossNotDecreasing"},
            },
        ],
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    return str(path)


def test_register_reports_the_rules_the_hook_configuration_starves(
    stack: None, tmp_path: Path, capsys
) -> None:
    path = _request(tmp_path, [{"CollectionName": "losses"}, {"CollectionName": "weights"}])
    assert main(["jobs", "register", "--from-request", path]) == 0  # a warning, not invalid input
    out = capsys.readouterr().out
    assert "2 rule(s) will see nothing with this hook configuration:" in out
    assert (
        "VanishingGradient will see nothing: the hook configuration saves the collections losses, weights"
        in out
    )
    assert (
        "not gradients; it reads the gradients collection; to save it: include_collections=['gradients']"
        in out
    )
    assert "DeadRelu will see nothing" in out
    assert "relu_output" in out
    assert "UnchangedWeights will see nothing" not in out
    assert "LossNotDecreasing will see nothing" not in out
    assert main(["jobs", "status", "sm-job", "--json"]) == 0
    desc = json.loads(capsys.readouterr().out)
    starved = desc["TornasoleRulesThatWillSeeNothing"]
    assert [w["RuleConfigurationName"] for w in starved] == ["VanishingGradient", "DeadRelu"]
    assert starved[0]["Missing"] == "gradients"


def test_a_configuration_that_saves_what_the_rules_read_warns_of_nothing(
    stack: None, tmp_path: Path, capsys
) -> None:
    collections = [
        {"CollectionName": "gradients"},
        {"CollectionName": "weights"},
        {"CollectionName": "relu_output", "CollectionParameters": {"include_regex": ".*relu_output"}},
    ]
    assert main(["jobs", "register", "--from-request", _request(tmp_path, collections)]) == 0
    assert "will see nothing" not in capsys.readouterr().out
    assert main(["jobs", "status", "sm-job", "--json"]) == 0
    assert "TornasoleRulesThatWillSeeNothing" not in json.loads(capsys.readouterr().out)


def test_no_hook_configuration_means_no_guess(stack: None, capsys) -> None:
    assert main(["jobs", "register", "--name", "j1", "--s3-output", "s3://trials/j1"]) == 0
    assert "will see nothing" not in capsys.readouterr().out


def test_unchanged_weights_is_accepted_by_register_invoke_and_rules_list(
    stack: None, tmp_path: Path, capsys
) -> None:
    argv = ["jobs", "register", "--name", "j1", "--s3-output", "s3://trials/j1", "--rule", "UnchangedWeights"]
    assert main(argv) == 0
    assert "UnchangedWeights" in capsys.readouterr().out
    assert main(["rules", "list", "--name", "UnchangedWeights", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    presets = (
        "collection_names=weights, num_steps=3, skip_frozen=True, fade_out_factor=10, fade_out_steps=32, "
        "faded_lr_fraction=0.001, fade_out_drift=True"
    )
    assert info["fires_when"].startswith(f"UnchangedTensor with {presets}: ")
    assert {p["name"]: p["default"] for p in info["parameters"]}["collection_names"] == "weights"
    hook = Hook(out_dir=str(tmp_path / "run"), save_config=SaveConfig(save_interval=1))
    for _ in range(4):  # weights that never change
        hook.save_tensor("weights/w", np.ones(4, np.float32), "weights")
        hook.next_step()
    hook.close()
    assert main(["invoke", str(tmp_path / "run"), "--rule", "UnchangedWeights"]) == 1
    assert (
        capsys.readouterr()
        .out.strip()
        .splitlines()[-1]
        .startswith("RESULT rule=UnchangedWeights status=IssuesFound first_step=2")
    )


def test_fail_on_issues_does_not_fail_on_nothing_evaluated(stack: None, capsys) -> None:
    from tornasole.evaluator.models import RuleStatus
    from tornasole.evaluator.store.state_table import StateTable
    from tornasole.evaluator.store.transitions import Change, Transitions

    assert (
        main(["jobs", "register", "--name", "j1", "--s3-output", "s3://trials/j1", "--rule", "DeadRelu"]) == 0
    )
    details = "NothingEvaluated: DeadRelu evaluated 0 of 5 steps: it reads ReLU outputs"

    def nothing_evaluated(state):  # what decisions.completion writes for it (tests/unit: test_decisions)
        if state.rule("DeadRelu").status != RuleStatus.IN_PROGRESS:
            return None
        return Change("DeadRelu", "NoIssuesFound", details=details)

    Transitions(StateTable()).apply("j1", nothing_evaluated, 1)
    capsys.readouterr()
    assert main(["jobs", "status", "j1", "--fail-on-issues"]) == 0
    from tornasole.cli.jobs_cmd import status_rows
    from tornasole.jobs import TornasoleJobs

    assert status_rows(TornasoleJobs(), "j1")[1][0][:2] == [
        "DeadRelu",
        "NothingEvaluated",
    ]  # not NoIssuesFound
    assert main(["jobs", "status", "j1", "--json", "--fail-on-issues"]) == 0
