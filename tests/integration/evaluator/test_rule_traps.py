"""Issue #28's rule traps: the recommended set's alias, and SimilarAcrossRuns against a shorter run."""

from __future__ import annotations

from evaluator_stack import BUCKET, TRIAL, Stack
from test_completion import deliver_all, summary

from tornasole.jobs import TornasoleJobs

OTHER = f"s3://{BUCKET}/jobs/reference-run"


def test_similar_across_runs_keeps_its_issue_after_a_shorter_other_run_ended(stack: Stack) -> None:
    """The other run trained 2 steps and ended; this one trains 4 and differs at step 1. Before: the
    steps past the other run's end raised, the rule went to Error and its IssuesFound was lost."""
    stack.write_collections(trial=OTHER)
    for step in range(2):
        stack.write_step(step, trial=OTHER)
    stack.write_end(trial=OTHER)
    rule = {
        "RuleConfigurationName": "SimilarAcrossRuns",
        "RuleParameters": {"rule_to_invoke": "SimilarAcrossRuns", "other_trials": OTHER},
    }
    TornasoleJobs().register_job("my-job", TRIAL, [rule])
    stack.notifications()  # the other run's own files: no job of theirs
    stack.write_collections()
    for step in range(4):
        stack.write_step(step, grad=2.0 if step == 1 else 1.0)
    stack.write_end()
    deliver_all(stack, stack.notifications())
    assert stack.describe()["TrainingJobStatus"] == "Completed"
    status, details = summary()["SimilarAcrossRuns"]
    assert status == "IssuesFound", details
    assert "gradients/fc.weight at step 1 differs" in details


def test_the_recommended_alias_registers_as_its_rule_and_presets(stack: Stack) -> None:
    """``UnchangedWeights`` (in the recommended set, shown by jobs status) registers by name too."""
    rules = [
        {
            "RuleConfigurationName": "UnchangedWeights",
            "RuleParameters": {"rule_to_invoke": "UnchangedWeights"},
        }
    ]
    desc = TornasoleJobs().register_job("my-job", TRIAL, rules)
    assert desc["DebugRuleConfigurations"][0]["RuleParameters"] == {
        "rule_to_invoke": "UnchangedTensor",
        "collection_names": "weights",
        "num_steps": "3",
        "skip_frozen": "True",  # the recommended entry's: a layer frozen on purpose is not "unchanged"
        "fade_out_factor": "10",  # and updates that faded out at a schedule's tail are not a stop
        "fade_out_steps": "32",  # read back over a cosine-to-0 tail of a long run (docs/RULES.md)
        "faded_lr_fraction": "0.001",  # and a window under a rate decayed below 1e-3 of its peak
        "fade_out_drift": "True",  # and a tail too slow per saved step to see
    }
    assert desc["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "InProgress"
