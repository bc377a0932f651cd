"""What a rule reads, and which rules a hook configuration gives nothing to read (``rules.inputs``)."""

from __future__ import annotations

from tornasole.rules.builtin.recommended import RECOMMENDED, recommended_rules_that_cannot_apply
from tornasole.rules.inputs import input_warnings, rule_needs, unreadable_rules
from tornasole.rules.registry import ALIASES, resolve_alias


def _hook(*collections: tuple[str, dict[str, str]]) -> dict:
    return {
        "S3OutputPath": "s3://b/p",
        "CollectionConfigurations": [
            {"CollectionName": n, "CollectionParameters": p} for n, p in collections
        ],
    }


def test_every_recommended_rule_says_what_it_reads() -> None:
    for name, rule, params in RECOMMENDED:
        needs = rule_needs(rule, params)
        assert needs is not None, name
        assert needs.text().startswith("it reads "), name


def test_the_recommended_alias_is_the_recommended_entry() -> None:
    entry = next((rule, params) for name, rule, params in RECOMMENDED if name == "UnchangedWeights")
    assert ALIASES["UnchangedWeights"] == entry
    assert resolve_alias("UnchangedWeights", {"num_steps": "7"}) == (
        "UnchangedTensor",
        {
            "collection_names": "weights",
            "num_steps": "7",
            "skip_frozen": "True",
            "fade_out_factor": "10",
            "fade_out_steps": "32",
            "faded_lr_fraction": "0.001",
            "fade_out_drift": "True",
        },
    )
    assert resolve_alias("DeadRelu", {"a": "1"}) == ("DeadRelu", {"a": "1"})


def test_no_hook_configuration_reports_nothing() -> None:
    assert recommended_rules_that_cannot_apply(None) == []
    assert input_warnings({"DebugHookConfig": {"CollectionConfigurations": []}}) == []


def test_a_configuration_saving_everything_the_set_reads_reports_nothing() -> None:
    hook = _hook(
        ("weights", {}),
        ("gradients", {}),
        ("relu_activations", {"include_regex": ".*relu_output"}),
        ("tanh_inputs", {"include_regex": ".*tanh_input"}),
    )
    assert recommended_rules_that_cannot_apply(hook) == []


def test_a_named_collection_the_configuration_lacks_is_reported_with_how_to_save_it() -> None:
    got = unreadable_rules(
        [("Grad", "VanishingGradient", {}), ("Loss", "LossNotDecreasing", {})], _hook(("weights", {}))
    )
    assert [g["RuleConfigurationName"] for g in got] == ["Grad"]
    assert got[0]["Missing"] == "gradients"
    assert "include_collections=['gradients']" in got[0]["Reason"]


def test_tensors_selected_by_name_are_given_the_benefit_of_any_include_regex() -> None:
    rules = [("DeadRelu", "DeadRelu", {})]
    assert unreadable_rules(rules, _hook(("acts", {"include_regex": ".*relu"}))) == []
    assert unreadable_rules(rules, _hook(("relu_output", {}))) == []
    got = unreadable_rules(rules, _hook(("weights", {})))
    assert got[0]["Missing"] == "a collection with an include_regex for them"
    hook_wide = {**_hook(("weights", {})), "HookParameters": {"include_regex": ".*relu.*"}}
    assert unreadable_rules(rules, hook_wide) == []


def test_a_user_tensor_regex_is_never_second_guessed() -> None:
    """A regex may name tensors a default collection saves (losses): no warning, only the explanation."""
    rules = [("Stalled", "StalledLoss", {"tensor_regex": "CrossEntropyLoss.*"})]
    assert unreadable_rules(rules, _hook(("weights", {}))) == []
    assert "tensor_regex 'CrossEntropyLoss.*'" in rule_needs("StalledLoss", rules[0][2]).reads


def test_custom_rules_are_not_judged_from_describe() -> None:
    detail = {
        "DebugHookConfig": _hook(("weights", {})),
        "DebugRuleConfigurations": [
            {
                "RuleConfigurationName": "Mine",
                "RuleParameters": {"rule_to_invoke": "VanishingGradient", "source_s3_uri": "s3://b/r.py"},
            },
            {"RuleConfigurationName": "VG", "RuleParameters": {"rule_to_invoke": "VanishingGradient"}},
        ],
    }
    assert [w["RuleConfigurationName"] for w in input_warnings(detail)] == ["VG"]
