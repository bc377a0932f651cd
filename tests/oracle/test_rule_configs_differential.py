"""``tornasole.rules.rule_configs`` against the real ``smdebug_rulesconfig`` 1.0.1 (in ``.venv-smdebug``).

SageMaker users build rule configurations with ``smdebug_rulesconfig`` (through the SDK's
``Rule.sagemaker(rule_configs.X())``); ours must give byte-for-byte the same dictionaries for every
builder, and the same answers from its helpers ``get_collection`` and ``is_valid_action_object``.
"""

from __future__ import annotations

from smdebug_runner import run_smdebug

from tornasole.rules import rule_configs as ours

BUILDERS = [
    "vanishing_gradient",
    "exploding_tensor",
    "weight_update_ratio",
    "dead_relu",
    "poor_weight_initialization",
    "saturated_activation",
    "tensor_variance",
    "all_zero",
    "class_imbalance",
    "confusion",
    "loss_not_decreasing",
    "overfit",
    "overtraining",
    "similar_across_runs",
    "stalled_training_rule",
    "unchanged_tensor",
    "check_input_images",
    "nlp_sequence_ratio",
    "feature_importance_overweight",
    "tree_depth",
    "create_xgboost_report",
]
COLLECTIONS = [
    "weights",
    "gradients",
    "losses",
    "input_image",
    "relu_output",
    "relu_input",
    "input_sequence",
    "x",
]


def _theirs() -> dict:
    return run_smdebug(
        """
        import smdebug_rulesconfig as rc
        emit({
            "version": rc.__version__,
            "exports": sorted(n for n in dir(rc) if not n.startswith("_")),
            "builders": {n: getattr(rc, n)() for n in INPUT["builders"]},
            "collections": {c: rc.get_collection(c) for c in INPUT["collections"]},
            "valid": [
                rc.is_valid_action_object(rc.StopTraining()),
                rc.is_valid_action_object(rc.ActionList(rc.Email("a@b.co"))),
                rc.is_valid_action_object("stoptraining"),
                rc.is_valid_action_object(None),
            ],
        })
        """,
        inputs={"builders": BUILDERS, "collections": COLLECTIONS},
    ).data


def test_every_builder_and_helper_matches_smdebug_rulesconfig() -> None:
    theirs = _theirs()
    assert theirs["version"] == "1.0.1"
    # the builders list is complete: every rule builder smdebug_rulesconfig exports is compared
    exported = {
        n
        for n in theirs["exports"]
        if n[0].islower() and n not in ("get_collection", "is_valid_action_object")
    }
    assert exported - {"actions", "debugger_rules", "profiler_rules"} == set(BUILDERS)
    for name in BUILDERS:
        assert getattr(ours, name)() == theirs["builders"][name], name
    for coll in COLLECTIONS:
        assert ours.get_collection(coll) == theirs["collections"][coll], coll
    assert [
        ours.is_valid_action_object(ours.StopTraining()),
        ours.is_valid_action_object(ours.ActionList(ours.Email("a@b.co"))),
        ours.is_valid_action_object("stoptraining"),
        ours.is_valid_action_object(None),
    ] == theirs["valid"]
