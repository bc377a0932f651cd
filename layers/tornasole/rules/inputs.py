"""What each built-in rule reads, how a training job saves it, and whether a hook configuration does.

Why: a rule whose tensors are never saved cannot judge the run. Said after training (the rule
ends ``NothingEvaluated``) the user has lost the run; said at registration, from the job's hook
configuration (SageMaker's ``DebugHookConfig.CollectionConfigurations``, which every SageMaker
request carries), the user can fix the configuration before training starts. Both messages come
from :func:`rule_needs`, so what registration warns about and what the final verdict explains are
the same words.

The check is conservative: it reports a rule only when the configuration certainly does not save
what the rule reads. A collection the hook saves by default (``losses``, and ``metrics`` the Keras
hook fills from its logs) counts as saved; a rule selecting its tensors by name (``DeadRelu``'s
``.*relu_output``) is reported only when no configured collection could hold them (none is named
for them and none has an ``include_regex``), since a regex cannot be compared with a regex.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_SAVED_COLLECTIONS",
    "INPUT_WARNINGS_FIELD",
    "input_warnings",
    "RuleNeeds",
    "configured_collections",
    "rule_needs",
    "unreadable_rules",
]

#: Collections a hook saves whatever its configuration says (the hooks' defaults).
DEFAULT_SAVED_COLLECTIONS = frozenset({"losses", "metrics", "default"})


@dataclass(frozen=True)
class RuleNeeds:
    """What a rule reads.

    Attributes
    ----------
    reads : str
        In words, for a person ("the gradients collection").
    how : str
        How a training job saves it (hook option, collection, ``include_regex``).
    collections : tuple of str
        Collections every one of which must be saved (empty: none in particular).
    by_name : tuple of str
        Collections named for tensors the rule selects by name (``relu_output``): saved when one of
        them, or any collection with an ``include_regex``, is configured. Empty: not selected by name.
    """

    reads: str
    how: str
    collections: tuple[str, ...] = ()
    by_name: tuple[str, ...] = ()

    def text(self) -> str:
        return f"it reads {self.reads}; to save it: {self.how}"


def _regex(params: Mapping[str, str], key: str, default: str) -> str:
    value = str(params.get(key) or "").strip()
    return value or default


def _collections(params: Mapping[str, str], default: str) -> tuple[str, ...]:
    raw = str(params.get("collection_names") or "").strip() or default
    return tuple(c.strip() for c in raw.split(",") if c.strip())


def _include(names: Iterable[str]) -> str:
    listed = ", ".join(repr(n) for n in names)
    return f"include_collections=[{listed}] (CollectionConfigurations: {listed.replace(chr(39), '')})"


#: Rules whose ``tensor_regex`` has a default naming what they read (described case by case below).
_OWN_REGEX = frozenset({"DeadRelu", "SaturatedActivation", "SlowConvergence", "OscillatingAccuracy"})


def _eval_loss_inputs(loss_kind: str) -> RuleNeeds:
    """What a rule scoring each validation pass from the loss's own inputs needs: the prediction and the
    target, saved next to the loss in EVAL mode."""
    return RuleNeeds(
        f"the registered {loss_kind} loss module's inputs in EVAL mode (<Loss>_input_0, the prediction, "
        "and <Loss>_input_1, the target) next to its output in the losses collection",
        "hook.register_loss(loss_fn), a validation loop after hook.set_mode(modes.EVAL), and a "
        'collection that includes both inputs: hook.get_collection("loss_inputs").include('
        '"[Ll]oss_input_[01]$") and include_collections=["loss_inputs"] (Keras: fit with validation '
        'data and "^(predictions|labels)$|^batch_loss/")',
        by_name=("loss_inputs", "inputs", "outputs"),
    )


def rule_needs(rule_to_invoke: str, params: Mapping[str, str] | None = None) -> RuleNeeds | None:
    """What the built-in ``rule_to_invoke`` reads with these parameters; None for a rule not described
    here (a custom rule, or a built-in that reads whatever was saved)."""
    p = dict(params or {})
    if p.get("tensor_regex") and rule_to_invoke not in _OWN_REGEX:
        regex = p["tensor_regex"]  # may name tensors a default collection saves: no registration warning
        return RuleNeeds(
            f"tensors matching tensor_regex {regex!r}",
            f"a collection whose include_regex saves them (hook.get_collection(NAME).include({regex!r}))",
        )
    if rule_to_invoke == "VanishingGradient":
        return RuleNeeds("the gradients collection", _include(["gradients"]), collections=("gradients",))
    if rule_to_invoke == "WeightUpdateRatio":
        return RuleNeeds(
            "the weights collection at two TRAIN steps",
            _include(["weights"]) + " with hook.set_mode(modes.TRAIN)",
            collections=("weights",),
        )
    if rule_to_invoke in ("UnchangedTensor", "AllZero", "TensorVariance") and p.get("collection_names"):
        names = _collections(p, "")
        return RuleNeeds(f"the collections {', '.join(names)}", _include(names), collections=names)
    if rule_to_invoke == "ZeroGradients":
        names = _collections(p, "gradients")
        acc = _regex(p, "accuracy_regex", ".*acc(uracy)?$")
        return RuleNeeds(
            f"the collections {', '.join(names)} in TRAIN mode and a validation accuracy (a tensor matching "
            f"{acc!r} in EVAL mode)",
            _include(names) + ', and hook.save_tensor("accuracy", acc, "metrics") in the validation loop '
            "after hook.set_mode(modes.EVAL)",
            collections=names,
        )
    if rule_to_invoke == "DeadRelu":
        regex = _regex(p, "tensor_regex", ".*relu_output")
        return RuleNeeds(
            f"ReLU outputs (tensors matching {regex!r})",
            f'a collection that includes them: hook.get_collection("relu_output").include({regex!r}) and '
            'include_collections=["relu_output"] (CollectionConfigurations: relu_output with include_regex '
            f"{regex})",
            by_name=("relu_output", "relu_activations"),
        )
    if rule_to_invoke == "SaturatedActivation":
        regex = _regex(p, "tensor_regex", ".*tanh_input|.*sigmoid_input")
        return RuleNeeds(
            f"tanh/sigmoid inputs (tensors matching {regex!r}); a network without tanh or sigmoid has none",
            f'a collection that includes them: hook.get_collection("tanh_inputs").include({regex!r}) and '
            'include_collections=["tanh_inputs"]',
            by_name=("tanh_inputs", "tanh_input", "sigmoid_inputs", "sigmoid_input"),
        )
    if rule_to_invoke == "PoorWeightInitialization":
        regex = _regex(p, "activation_inputs_regex", ".*relu_input")
        return RuleNeeds(
            f"ReLU inputs (tensors matching {regex!r})",
            f'hook.get_collection("relu_input").include({regex!r}) and include_collections=["relu_input"]',
            by_name=("relu_input",),
        )
    if rule_to_invoke == "SlowConvergence":
        acc = _regex(p, "tensor_regex", ".*acc(uracy)?$")
        return RuleNeeds(
            f"a validation accuracy (a tensor matching {acc!r} in EVAL mode)",
            'hook.save_tensor("accuracy", acc, "metrics") in the validation loop after '
            "hook.set_mode(modes.EVAL) (Keras's hook saves its accuracy metric by default)",
        )
    if rule_to_invoke == "OscillatingAccuracy":
        acc = _regex(p, "tensor_regex", ".*epoch_acc(uracy)?$")
        return RuleNeeds(
            f"the epoch's training accuracy (a tensor matching {acc!r}, saved once per epoch in TRAIN mode)",
            'hook.save_tensor("epoch_accuracy", correct / seen, "epoch_end") at each epoch\'s last step, '
            "with "
            'hook.get_collection("epoch_end").save_config = SaveConfig(save_interval=1) (Keras: '
            "tensor_regex=accuracy)",
        )
    if rule_to_invoke in ("Overfit", "ValidationLossNotDecreasing"):
        return RuleNeeds(
            "losses in both TRAIN and EVAL mode (a validation pass)",
            "a validation loop after hook.set_mode(modes.EVAL) that computes the registered loss "
            "(hook.register_loss), then hook.set_mode(modes.TRAIN)",
        )
    if rule_to_invoke == "InitialLossTooHigh":
        return RuleNeeds(
            "the losses collection in TRAIN mode from the first step, and for a cross-entropy with no "
            "num_classes the gradients collection (the output layer's width), for a squared error the "
            "target the loss module was given (<Loss>_input_1) and the weights collection (their scale)",
            "hook.register_loss(loss_fn) (saved by default) with hook.set_mode(modes.TRAIN), and "
            "include_collections=['gradients'] or num_classes / chance_loss; for a squared error "
            'hook.get_collection("loss_inputs").include("[Ll]oss_input_1$") and '
            "include_collections=['loss_inputs', 'weights'] or chance_loss; Keras: a collection that "
            'includes the batch loss and the outputs: hook.get_collection("loss_inputs").include('
            '"^predictions$|^batch_loss/") and include_collections=["loss_inputs"]',
        )
    if rule_to_invoke == "EarlyLossDivergence":
        return RuleNeeds(
            "a cross-entropy in the losses collection in TRAIN mode from the first step, and with no "
            "num_classes the gradients collection (the output layer's width; a binary cross-entropy: none)",
            "hook.register_loss(loss_fn) (saved by default) with hook.set_mode(modes.TRAIN), and "
            "include_collections=['gradients'] or num_classes / chance_loss; Keras: a collection that "
            'includes the batch loss and the outputs: hook.get_collection("loss_inputs").include('
            '"^predictions$|^batch_loss/") and include_collections=["loss_inputs"]',
        )
    if rule_to_invoke == "StalledLoss":
        return RuleNeeds(
            "losses in EVAL mode (validation passes)",
            "a validation loop after hook.set_mode(modes.EVAL) that computes the registered loss "
            "(hook.register_loss)",
        )
    if rule_to_invoke in ("LossNotDecreasing", "OscillatingLoss", "Overtraining"):
        mode = str(p.get("mode") or "").upper()
        where = f" in {mode} mode" if mode and mode != "GLOBAL" else ""
        return RuleNeeds(
            f"the losses collection{where}",
            "hook.register_loss(loss_fn) (the losses collection is saved by default)"
            + (f" with hook.set_mode(modes.{mode})" if where else ""),
        )
    if rule_to_invoke == "SoftmaxBeforeCrossEntropy":
        return RuleNeeds(
            "the registered loss module's first input (<Loss>_input_0, the prediction it is fed) next to its "
            "output in the losses collection",
            "hook.register_loss(loss_fn) and a collection that includes the input: hook.get_collection("
            '"loss_inputs").include("[Ll]oss_input_0$") and include_collections=["loss_inputs"] (Keras: '
            '"^predictions$|^batch_loss/", the model\'s outputs and the batch loss of a from_logits loss)',
            by_name=("loss_inputs", "inputs", "outputs"),
        )
    if rule_to_invoke == "RegressionWorseThanMean":
        return _eval_loss_inputs("regression (squared-error, L1, Huber)")
    if rule_to_invoke == "ClassifierNoBetterThanPrior":
        return _eval_loss_inputs("cross-entropy")
    if rule_to_invoke == "InputsNotNormalized":
        regex = _regex(p, "regex", r"^[A-Z]\w*(?<!Loss)_input_0$|^inputs(_\d+)?$")
        return RuleNeeds(
            f"the model's own input (tensors matching {regex!r}: PyTorch's <ModelClass>_input_0, Keras's "
            "inputs)",
            f'a collection that includes it: hook.get_collection("model_input").include({regex!r}) and '
            'include_collections=["model_input"] (CollectionConfigurations: model_input with include_regex '
            f"{regex}; inputs are large: a save_interval of 100 or more)",
            by_name=("model_input", "inputs"),
        )
    if rule_to_invoke in ("ExplodingTensor", "UnchangedTensor", "AllZero", "TensorVariance"):
        return RuleNeeds(  # every saved tensor: nothing in particular to save, so nothing to warn of
            "every saved tensor (or those of its collection_names / tensor_regex)",
            "any collection: include_collections=[...] (CollectionConfigurations), or hook.save_tensor",
        )
    return _llm_rule_needs(rule_to_invoke)


#: What the rules of issue 30 read (names: ``tornasole.core.llm_signals``) and how a training loop saves it.
#: Scalars need no collection, so none is named and registration warns of nothing.
_LLM_NEEDS: dict[str, tuple[str, str]] = {
    "LossSpike": ("the losses collection", 'hook.register_loss(loss_fn) or hook.save_scalar("loss", loss)'),
    "GradientNormSpike": (
        "gradient norms: grad_norm/total or grad_norm/<param> scalars, or the gradients collection",
        'hook.save_scalar("grad_norm/total", total_norm) (the value clip_grad_norm_ returns), or '
        'include_collections=["gradients"]',
    ),
    "NonFiniteOrigin": (
        "every saved tensor at a step, in the order the hook wrote them",
        'include_regex=[".*_output_0"] (module outputs, so it can name a module) and include_collections='
        '["gradients"]',
    ),
    "LossScaleCollapse": (
        "the loss scale (a loss_scale scalar) and optionally skipped_step",
        'hook.save_scalar("loss_scale", scaler.get_scale()) after scaler.update() at every step',
    ),
    "LearningRateDiscontinuity": (
        "learning rates (lr/<group> scalars)",
        'hook.save_scalar(f"lr/{i}", group["lr"]) for each optimizer.param_groups entry at every step',
    ),
    "ExpertImbalance": (
        "routers' per-expert load (router/<layer>/expert_load)",
        "tornasole.pytorch.save_router_stats(hook, layer_name, router_probs) after each forward pass",
    ),
    "AttentionEntropyCollapse": (
        "attention entropies (attention_entropy/<layer>) or attention weights",
        "tornasole.pytorch.save_attention_entropy(hook, layer_name, attention_weights) after each forward "
        "pass",
    ),
    "DataReplay": (
        "batch fingerprints (batch_fingerprint/<input>)",
        "tornasole.pytorch.record_batch(hook, batch, epoch=epoch) at every step",
    ),
    "AttentionLogitGrowth": (
        "attention logit maxima (attention_logit_max/<layer>)",
        "tornasole.pytorch.save_attention_logit_max(hook, layer_name, attention_logits) after each forward "
        "pass",
    ),
}


def _llm_rule_needs(rule_to_invoke: str) -> RuleNeeds | None:
    found = _LLM_NEEDS.get(rule_to_invoke)
    return None if found is None else RuleNeeds(*found)


def configured_collections(hook_config: Mapping[str, Any] | None) -> dict[str, dict[str, str]] | None:
    """``{collection name: its parameters}`` of a ``DebugHookConfig``; None when there is none (nothing
    can be said about what the job saves)."""
    if not hook_config:
        return None
    confs = hook_config.get("CollectionConfigurations")
    if confs is None:
        return None
    out: dict[str, dict[str, str]] = {}
    for conf in confs or ():
        if isinstance(conf, Mapping) and conf.get("CollectionName"):
            out[str(conf["CollectionName"])] = {
                str(k): str(v) for k, v in dict(conf.get("CollectionParameters") or {}).items()
            }
    return out


def _missing(needs: RuleNeeds, saved: Mapping[str, Mapping[str, str]], hook_regex: bool) -> list[str]:
    names = set(saved) | DEFAULT_SAVED_COLLECTIONS
    missing = [c for c in needs.collections if c not in names]
    if needs.by_name:
        any_regex = hook_regex or any("include_regex" in params for params in saved.values())
        if not any_regex and not names.intersection(needs.by_name):
            missing.append("a collection with an include_regex for them")
    return missing


def unreadable_rules(
    rules: Iterable[tuple[str, str, Mapping[str, str]]], hook_config: Mapping[str, Any] | None
) -> list[dict[str, str]]:
    """The rules that will see nothing under ``hook_config``: one ``{RuleConfigurationName, Missing,
    Reason}`` per rule, from ``(configuration name, rule_to_invoke, parameters)`` triples. Empty when the
    job has no hook configuration (what it saves is then unknown) or every rule can read something."""
    saved = configured_collections(hook_config)
    if saved is None:
        return []
    hook_params = (hook_config or {}).get("HookParameters") or {}
    hook_regex = isinstance(hook_params, Mapping) and bool(hook_params.get("include_regex"))
    out = []
    for name, rule_to_invoke, params in rules:
        needs = rule_needs(rule_to_invoke, params)
        if needs is None or not (needs.collections or needs.by_name):
            continue
        missing = _missing(needs, saved, hook_regex)
        if missing:
            configured = ", ".join(sorted(saved)) or "none"
            out.append(
                {
                    "RuleConfigurationName": name,
                    "Missing": ", ".join(missing),
                    "Reason": f"{name} will see nothing: the hook configuration saves the collections "
                    f"{configured} (and the defaults {', '.join(sorted(DEFAULT_SAVED_COLLECTIONS))}), not "
                    f"{', '.join(missing)}; {needs.text()}",
                }
            )
    return out


#: The ``describe`` field (a Tornasole extension) listing the rules that will see nothing.
INPUT_WARNINGS_FIELD = "TornasoleRulesThatWillSeeNothing"


def input_warnings(detail: Mapping[str, Any]) -> list[dict[str, str]]:
    """:func:`unreadable_rules` for a ``describe`` dict: its ``DebugHookConfig`` and
    ``DebugRuleConfigurations``. A hook configuration without collections is taken as none given
    (a job registered without one stores an empty list): nothing is reported for it."""
    hook = detail.get("DebugHookConfig") or {}
    if not (hook.get("CollectionConfigurations") or []):
        return []
    rules = []
    for conf in detail.get("DebugRuleConfigurations") or ():
        params = {str(k): str(v) for k, v in dict(conf.get("RuleParameters") or {}).items()}
        name = str(conf.get("RuleConfigurationName") or "")
        if params.get("source_s3_uri"):
            continue  # a custom rule: what it reads is its own code's business
        rules.append((name, params.pop("rule_to_invoke", name), params))
    return unreadable_rules(rules, hook)
