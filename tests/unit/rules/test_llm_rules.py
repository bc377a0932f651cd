"""The rules for today's training failures (issue 30): each fires at the onset of its failure, stays quiet
on the healthy pattern that resembles it, and refuses bad parameters by name."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tornasole.core.attention_entropy import normalised_entropy
from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule, invoke_rule

RNG = np.random.default_rng(0)


def first_firing(rule, steps) -> int | None:
    for s in steps:
        if rule.evaluate(s).fired:
            return s
    return None


def noisy_loss(n: int, seed: int = 0) -> list[float]:
    """A healthy LM loss: decays from 6 to ~3 with 3% noise and a few ordinary bumps."""
    rng = np.random.default_rng(seed)
    out = [3.0 + 3.0 * math.exp(-s / 30) for s in range(n)]
    return [v * (1 + 0.03 * rng.standard_normal()) for v in out]


# -- LossSpike -------------------------------------------------------------------------------------------
def test_loss_spike_fires_on_a_bad_batch_at_its_step(trial_factory):
    losses = noisy_loss(120)
    losses[90] *= 4.0  # a bad batch: 4x the loss (the window still holds the early descent from 6)
    trial = trial_factory({s: {"loss": np.float32(v)} for s, v in enumerate(losses)})
    rule = create_rule("LossSpike", trial)
    assert first_firing(rule, range(120)) == 90
    out = rule.evaluate(90)
    assert "standard deviations above the mean" in out.details
    assert "loss" in out.details
    assert out.values["criterion"] == "z_score"


def test_loss_spike_quiet_on_a_healthy_noisy_run(trial_factory):
    losses = noisy_loss(200, seed=1)
    trial = trial_factory({s: {"loss": np.float32(v)} for s, v in enumerate(losses)})
    assert first_firing(create_rule("LossSpike", trial), range(200)) is None


def test_loss_spike_factor_alone_catches_a_blow_up_before_the_window_fills(trial_factory):
    losses = noisy_loss(20) + [400.0]  # LR blow-up: 60x the largest early loss
    trial = trial_factory({s: {"loss": np.float32(v)} for s, v in enumerate(losses)})
    rule = create_rule("LossSpike", trial, z_threshold="0")
    assert first_firing(rule, range(21)) == 20
    assert rule.evaluate(20).values["criterion"] == "factor"
    # off: neither criterion can judge (the window has 20 < 32 values)
    assert first_firing(create_rule("LossSpike", trial, factor="0"), range(21)) is None


def test_loss_spike_non_finite_loss_fires(trial_factory):
    trial = trial_factory({0: {"loss": np.float32(2)}, 1: {"loss": np.float32("nan")}})
    assert create_rule("LossSpike", trial).evaluate(1).fired


def test_loss_spike_parameters_are_checked(trial_factory):
    trial = trial_factory({0: {"loss": np.float32(1)}})
    with pytest.raises(RuleParameterError, match="LossSpike.*min_window.*must be <= window"):
        create_rule("LossSpike", trial, window="10", min_window="20")
    with pytest.raises(RuleParameterError, match="LossSpike.*'z_threshold' value 'x' is not a float"):
        create_rule("LossSpike", trial, z_threshold="x")
    rule = create_rule("LossSpike", trial)
    assert rule.history_steps() == 128 + 16
    assert rule.leading_steps() == 100


# -- GradientNormSpike -----------------------------------------------------------------------------------
def _grads(n: int, spike_at: int | None = None, layer: str = "gradients/fc2.weight") -> dict:
    rng = np.random.default_rng(3)
    steps = {}
    for s in range(n):
        g1 = rng.standard_normal(16) * 0.1
        g2 = rng.standard_normal(16) * 0.1
        if spike_at is not None and s == spike_at:
            if layer == "gradients/fc2.weight":
                g2 = g2 * 30
            else:
                g1, g2 = g1 * 30, g2 * 30
        steps[s] = {"gradients/fc1.weight": g1, "gradients/fc2.weight": g2, "loss": np.float32(1)}
    return steps


def test_gradient_norm_spike_in_one_layer_is_named(trial_factory):
    trial = trial_factory(_grads(40, spike_at=30))
    rule = create_rule("GradientNormSpike", trial, per_layer="True")
    assert first_firing(rule, range(40)) == 30
    assert rule.evaluate(30).values["tensor"] == "gradients/fc2.weight"
    # by default the total alone is judged: one layer's 30x makes the total >10x too
    total = create_rule("GradientNormSpike", trial)
    assert first_firing(total, range(40)) == 30
    assert total.evaluate(30).values["tensor"] == "total gradient norm"


def test_gradient_norm_spike_reads_a_saved_total_and_the_l2_reductions(trial_factory):
    norms = [1.0 + 0.05 * math.sin(s) for s in range(30)]
    norms[25] = 20.0
    trial = trial_factory({s: {"scalar/grad_norm/total": np.float32(v)} for s, v in enumerate(norms)})
    rule = create_rule("GradientNormSpike", trial)
    assert first_firing(rule, range(30)) == 25
    assert rule.evaluate(25).values["tensor"] == "scalar/grad_norm/total"


def test_gradient_norm_spike_quiet_on_healthy_and_on_skipped_fp16_steps(trial_factory):
    steps = _grads(40)
    steps[20]["gradients/fc2.weight"] = np.full(16, np.inf)  # a step the loss scaler skipped
    trial = trial_factory(steps)
    assert first_firing(create_rule("GradientNormSpike", trial), range(40)) is None


def test_gradient_norm_spike_parameters(trial_factory):
    trial = trial_factory({0: {"loss": np.float32(1)}})
    with pytest.raises(RuleParameterError, match="'reference' value 'mean' is not one of median, max"):
        create_rule("GradientNormSpike", trial, reference="mean")
    with pytest.raises(RuleParameterError, match="'factor' value 1.0 must be > 1"):
        create_rule("GradientNormSpike", trial, factor="1")


# -- LossScaleCollapse -----------------------------------------------------------------------------------
def _scaler_run(n: int, collapse_at: int | None) -> dict:
    """GradScaler's dynamics: start at 65536, halve on overflow, double after 10 clean steps."""
    scale, clean, steps = 65536.0, 0, {}
    for s in range(n):
        overflow = s in (2, 3) or (collapse_at is not None and s >= collapse_at)
        steps[s] = {"scalar/loss_scale": np.float32(scale), "loss": np.float32(2.0)}
        if overflow:
            scale, clean = max(scale / 2, 1.0), 0
        else:
            clean += 1
            if clean == 10:
                scale, clean = scale * 2, 0
    return steps


def test_loss_scale_collapse_fires_on_skips_piling_up_and_on_the_floor(trial_factory):
    trial = trial_factory(_scaler_run(80, collapse_at=30))
    rule = create_rule("LossScaleCollapse", trial)
    first = first_firing(rule, range(80))
    assert first is not None
    assert 30 < first <= 30 + 20
    assert rule.evaluate(first).values["criterion"] == "skipped"
    stuck = create_rule("LossScaleCollapse", trial, max_skip_fraction="1")
    at = first_firing(stuck, range(80))
    assert at is not None
    assert stuck.evaluate(at).values["criterion"] == "stuck"


def test_loss_scale_collapse_quiet_on_a_healthy_scaler(trial_factory):
    trial = trial_factory(_scaler_run(80, collapse_at=None))
    assert first_firing(create_rule("LossScaleCollapse", trial), range(80)) is None


def test_loss_scale_collapse_reads_saved_skip_flags(trial_factory):
    steps = {s: {"loss_scale": np.float32(1024), "skipped_step": np.float32(s >= 10)} for s in range(40)}
    trial = trial_factory(steps)
    # 11 of the last 20 steps skipped at step 20: the first step over half
    assert first_firing(create_rule("LossScaleCollapse", trial), range(40)) == 20


# -- LearningRateDiscontinuity -------------------------------------------------------------------------
def _cosine(n: int, warmup: int = 10, peak: float = 1e-3) -> list[float]:
    return [
        peak * (s + 1) / warmup
        if s < warmup
        else peak * 0.5 * (1 + math.cos(math.pi * (s - warmup) / (n - warmup)))
        for s in range(n)
    ]


def test_lr_warmup_restart_after_a_resume_fires_one_step_after_the_resume(trial_factory):
    lrs = _cosine(100)[:60] + _cosine(100)[:40]  # resumed at 60 without the scheduler's state
    trial = trial_factory({s: {"scalar/lr/0": np.float32(v)} for s, v in enumerate(lrs)})
    rule = create_rule("LearningRateDiscontinuity", trial)
    # the drop at 60 is a restart once the rate climbs again at 61 (a step schedule's would stay flat)
    assert first_firing(rule, range(100)) == 61
    outcome = rule.evaluate(61)
    assert outcome.values["criterion"] == "drop"
    assert outcome.values["drop_step"] == 60


def test_lr_jump_back_to_the_peak_fires_as_a_rise(trial_factory):
    lrs = _cosine(100)[:60] + [1e-3] + _cosine(100)[61:]
    trial = trial_factory({s: {"lr/0": np.float32(v)} for s, v in enumerate(lrs)})
    rule = create_rule("LearningRateDiscontinuity", trial)
    assert first_firing(rule, range(100)) == 60
    assert rule.evaluate(60).values["criterion"] == "rise"


def test_lr_healthy_schedules_and_planned_drops_are_quiet(trial_factory):
    for lrs in (_cosine(100), [1e-3 * (1 - s / 50) for s in range(51)]):  # cosine to 0; linear decay to 0
        trial = trial_factory({s: {"lr/0": np.float32(v)} for s, v in enumerate(lrs)})
        assert first_firing(create_rule("LearningRateDiscontinuity", trial), range(len(lrs))) is None
    steps = [0.1 if s < 30 else 0.01 for s in range(60)]  # StepLR at 30: held after the drop
    trial = trial_factory({s: {"lr/0": np.float32(v)} for s, v in enumerate(steps)})
    assert first_firing(create_rule("LearningRateDiscontinuity", trial), range(60)) is None
    restart = _cosine(100)[:60] + _cosine(100)[:40]  # a warmup restarted at 60, declared on purpose
    trial = trial_factory({s: {"lr/0": np.float32(v)} for s, v in enumerate(restart)})
    assert first_firing(create_rule("LearningRateDiscontinuity", trial), range(100)) == 61
    assert (
        first_firing(create_rule("LearningRateDiscontinuity", trial, planned_steps="60"), range(100)) is None
    )
    zeroed = [1e-3] * 30 + [0.0] * 30  # a scheduler bug: fires at the drop, unless drops are allowed
    trial = trial_factory({s: {"lr/0": np.float32(v)} for s, v in enumerate(zeroed)})
    assert first_firing(create_rule("LearningRateDiscontinuity", trial), range(60)) == 30
    assert (
        first_firing(create_rule("LearningRateDiscontinuity", trial, allow_drops="true"), range(60)) is None
    )


# -- NonFiniteOrigin -------------------------------------------------------------------------------------
def test_non_finite_origin_names_the_first_module_in_forward_order(tmp_path):
    """A real PyTorch model whose middle block takes a log of negative values: every later output, the
    loss and all gradients are NaN; the rule names the middle block, which alphabetical order would not."""
    import torch
    from torch import nn

    import tornasole.pytorch as ts
    from tornasole.trials import create_trial

    class Log(nn.Module):
        def forward(self, x):
            return torch.log(x)

    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("z_embed", nn.Linear(4, 8))
    model.add_module("m_log", Log())
    model.add_module("a_head", nn.Linear(8, 1))
    hook = ts.Hook(
        str(tmp_path / "run"),
        save_config=ts.SaveConfig(save_interval=1),
        include_regex=[".*_output_0"],
        include_collections=["gradients", "losses"],
        stop_check_interval=None,
    )
    hook.register_module(model)
    x = torch.randn(16, 4)
    loss = model(x).pow(2).mean()
    hook.record_tensor_value("loss", loss)
    loss.backward()
    hook.close()
    trial = create_trial(str(tmp_path / "run"), collections_timeout=1.0, poll_interval=0.01)
    out = create_rule("NonFiniteOrigin", trial).evaluate(0)
    assert out.fired
    assert out.values["tensor"] == "m_log", out.details
    assert out.values["phase"] == "forward"
    # ExplodingTensor reports the alphabetically first non-finite tensor instead
    assert "m_log" not in create_rule("ExplodingTensor", trial).evaluate(0).values["tensor"]


def test_non_finite_origin_backward_only_and_scaler_skips(trial_factory):
    order = {
        "fc1_output_0": np.ones(3),
        "loss": np.float32(1),
        "gradients/fc2.weight": np.ones(3),
        "gradients/fc1.weight": np.array([np.nan, 1, 1]),
    }
    trial = trial_factory({0: order})
    out = create_rule("NonFiniteOrigin", trial, skip_scaler_overflow="false").evaluate(0)
    assert out.fired
    assert out.values["phase"] == "backward"
    assert out.values["tensor"] == "fc1.weight"
    # by default: only gradients non-finite under a finite loss is a step a loss scaler skipped
    assert not create_rule("NonFiniteOrigin", trial).evaluate(0).fired
    trial = trial_factory({0: {**order, "loss": np.float32("inf")}})
    assert create_rule("NonFiniteOrigin", trial).evaluate(0).values["tensor"] == "loss"


# -- ExpertImbalance -------------------------------------------------------------------------------------
def _loads(n: int, dead_from: int | None = None, idle_at: tuple = ()) -> dict:
    rng = np.random.default_rng(5)
    steps = {}
    for s in range(n):
        load = np.full(4, 0.25) + rng.normal(0, 0.03, 4)
        if (dead_from is not None and s >= dead_from) or s in idle_at:
            load[2] = 0.0
        steps[s] = {"router/layers.0.moe/expert_load": np.clip(load, 0, None) / np.clip(load, 0, None).sum()}
    return steps


def test_expert_imbalance_fires_on_a_dead_expert_after_num_steps(trial_factory):
    trial = trial_factory(_loads(80, dead_from=12))
    rule = create_rule("ExpertImbalance", trial)
    assert first_firing(rule, range(80)) == 61  # 50 consecutive saved steps: 12..61
    out = rule.evaluate(61)
    assert out.values["tensor"] == "layers.0.moe"
    assert out.values["expert"] == 2
    assert "dead" in out.details


def test_expert_imbalance_quiet_on_briefly_idle_experts(trial_factory):
    trial = trial_factory(_loads(30, idle_at=(5, 6, 20)))
    assert first_firing(create_rule("ExpertImbalance", trial), range(30)) is None


def test_expert_imbalance_quiet_on_a_healthy_routers_early_idle_spell(trial_factory):
    # the longest idle stretch of a healthy router in the MoE families: 36 steps, early in training
    trial = trial_factory(_loads(120, idle_at=tuple(range(33, 69))))
    assert first_firing(create_rule("ExpertImbalance", trial), range(120)) is None
    assert (
        first_firing(create_rule("ExpertImbalance", trial, num_steps="5"), range(120)) == 37
    )  # the old default


def test_expert_imbalance_overloaded(trial_factory):
    steps = {s: {"router/r/expert_load": np.array([0.85, 0.05, 0.05, 0.05])} for s in range(60)}
    rule = create_rule("ExpertImbalance", trial_factory(steps), dead_fraction="0")
    assert first_firing(rule, range(60)) == 49
    assert rule.evaluate(49).values["criterion"] == "overloaded"


def test_save_router_stats_saves_the_load_the_rule_reads(tmp_path):
    import torch

    import tornasole.pytorch as ts
    from tornasole.pytorch.llm_stats import expert_load
    from tornasole.trials import create_trial

    probs = torch.tensor([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.1, 0.8, 0.1], [0.5, 0.4, 0.1]])
    assert expert_load(probs).tolist() == [0.75, 0.25, 0.0]
    assert expert_load(probs, top_k=2).tolist() == [0.5, 0.5, 0.0]
    assert expert_load(torch.tensor([3, 1])).tolist() == [0.75, 0.25]
    with pytest.raises(Exception, match="top_k=4 must be in"):
        expert_load(probs, top_k=4)
    model = torch.nn.Linear(2, 3)
    hook = ts.Hook(
        str(tmp_path / "run"), save_config=ts.SaveConfig(save_interval=1), stop_check_interval=None
    )
    hook.register_module(model)
    for _ in range(6):
        logits = model(torch.randn(8, 2))
        ts.save_router_stats(
            hook, "moe0", torch.stack([logits[:, 0] * 0 + 1, logits[:, 1] * 0, logits[:, 2] * 0], 1)
        )
    hook.close()
    trial = create_trial(str(tmp_path / "run"), collections_timeout=1.0, poll_interval=0.01)
    assert "router/moe0/expert_load" in trial.tensor_names()
    rule = create_rule("ExpertImbalance", trial, num_steps="5")
    assert first_firing(rule, trial.steps()) == 4  # experts 1 and 2 never receive a token


# -- AttentionEntropyCollapse ----------------------------------------------------------------------------
def test_normalised_entropy_of_causal_uniform_and_collapsed_maps():
    causal = np.tril(np.ones((4, 4)))
    causal = causal / causal.sum(axis=1, keepdims=True)
    assert normalised_entropy(causal) == pytest.approx(1.0)
    sharp = np.tril(np.full((4, 4), 1e-6)) + np.eye(4)
    assert normalised_entropy(sharp / sharp.sum(axis=1, keepdims=True)) < 0.01
    assert normalised_entropy(np.ones((1, 1))) is None


def test_attention_entropy_collapse_from_saved_weights_and_saved_entropies(trial_factory):
    def attn(temp: float) -> np.ndarray:
        logits = RNG.standard_normal((2, 6, 6)) * temp
        logits = np.where(np.tril(np.ones((6, 6))) > 0, logits, -np.inf)
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    steps = {s: {"layers.0.attn_weights": attn(1.0 if s < 10 else 200.0)} for s in range(16)}
    rule = create_rule("AttentionEntropyCollapse", trial_factory(steps))
    assert first_firing(rule, range(16)) == 12  # 3 consecutive collapsed saves: 10, 11, 12
    saved = {s: {"scalar/attention_entropy/layers.1": np.float32(0.8 if s < 5 else 0.02)} for s in range(10)}
    rule = create_rule("AttentionEntropyCollapse", trial_factory(saved))
    assert first_firing(rule, range(10)) == 7
    assert rule.evaluate(7).values["tensor"] == "layers.1"


# -- every new rule: through invoke_rule, advice and rules list ------------------------------------------
NEW = [
    "LossSpike",
    "GradientNormSpike",
    "NonFiniteOrigin",
    "LossScaleCollapse",
    "LearningRateDiscontinuity",
    "ExpertImbalance",
    "AttentionEntropyCollapse",
]


@pytest.mark.parametrize("name", NEW)
def test_new_rules_are_listed_and_configured(name, capsys):
    from tornasole.cli.main import main
    from tornasole.rules import rule_configs as rc
    from tornasole.rules import rule_names

    assert name in rule_names()
    assert main(["rules", "list"]) == 0
    assert f"\n{name} " in capsys.readouterr().out
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    assert getattr(rc, snake)()["DebugRuleConfiguration"]["RuleParameters"] == {"rule_to_invoke": name}


def test_invoke_rule_runs_a_new_rule_over_a_whole_trial(trial_factory):
    losses = noisy_loss(60)
    losses[50] = 100.0
    trial = trial_factory({s: {"loss": np.float32(v)} for s, v in enumerate(losses)})
    from tornasole.exceptions import RuleEvaluationConditionMet

    with pytest.raises(RuleEvaluationConditionMet) as info:
        invoke_rule(create_rule("LossSpike", trial), raise_eval_cond=True)
    assert info.value.step == 50


def test_a_new_rule_that_saw_nothing_says_how_to_save_its_signal(trial_factory):
    from tornasole.rules.verdict import nothing_evaluated_details

    text = nothing_evaluated_details("LearningRateDiscontinuity", "LearningRateDiscontinuity", {}, 3)
    assert "lr/<group> scalars" in text
    assert 'hook.save_scalar(f"lr/{i}", group["lr"])' in text
    text = nothing_evaluated_details("ExpertImbalance", "ExpertImbalance", {}, 3)
    assert "save_router_stats" in text
    trial = trial_factory({s: {"loss": np.float32(1)} for s in range(3)})
    summary = invoke_rule(create_rule("LossScaleCollapse", trial))
    assert summary.status == "NothingEvaluated"
