"""DataReplay and AttentionLogitGrowth (issue 30): each fires at its failure on a small trace, stays quiet on
the healthy pattern that resembles it (epochs that repeat data, a duplicate batch, logits that stay under the
cap), refuses bad parameters by name, and is listed and configured like every built-in rule."""

from __future__ import annotations

import numpy as np
import pytest

from tornasole.core.batch_fingerprint import fingerprint_record
from tornasole.exceptions import RuleParameterError
from tornasole.rules import create_rule

NAME = "scalar/batch_fingerprint/input"


def first_firing(rule, steps) -> int | None:
    for s in steps:
        if rule.evaluate(s).fired:
            return s
    return None


def batches(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 100, size=(4, 8)) for _ in range(n)]


def fingerprints(order: list[int], epochs: list[int | None], data: list[np.ndarray]) -> dict[int, dict]:
    return {
        s: {"batch_fingerprint/input": fingerprint_record(data[i], e)}
        for s, (i, e) in enumerate(zip(order, epochs, strict=True))
    }


# -- DataReplay --------------------------------------------------------------------------------------------
def test_data_replay_fires_when_a_resume_restarts_the_epoch(trial_factory):
    data = batches(10)
    # epoch 0: batches 0..9; epoch 1 in a new order; a resume at step 15 restarts epoch 1 from its start
    perm = [3, 7, 1, 9, 0, 2, 8, 5, 4, 6]
    order = list(range(10)) + perm[:5] + perm
    epochs = [0] * 10 + [1] * 15
    rule = create_rule("DataReplay", trial_factory(fingerprints(order, epochs, data)))
    assert first_firing(rule, range(len(order))) == 17  # steps 15, 16, 17 replay 10, 11, 12
    out = rule.evaluate(17)
    assert "steps 15..17 trained on the batches of steps 10..12 (epoch 1)" in out.details
    assert out.values["tensor"] == "batch_fingerprint/input"
    assert out.values["replayed_step"] == 12


def test_data_replay_quiet_on_epochs_that_repeat_the_same_order_when_the_epoch_is_recorded(trial_factory):
    data = batches(6)
    order = list(range(6)) * 4  # no shuffling: every epoch is the previous one again
    epochs = [s // 6 for s in range(24)]
    rule = create_rule("DataReplay", trial_factory(fingerprints(order, epochs, data)))
    assert first_firing(rule, range(24)) is None
    # without the epoch the same loop is a replay, unless epoch_steps says how long an epoch is
    bare = trial_factory(fingerprints(order, [None] * 24, data))
    assert first_firing(create_rule("DataReplay", bare), range(24)) == 8
    assert first_firing(create_rule("DataReplay", bare, epoch_steps="6"), range(24)) is None


def test_data_replay_quiet_on_a_duplicate_batch_and_on_shuffled_epochs(trial_factory):
    data = batches(12)
    data[7] = data[2].copy()  # the data set holds the same batch twice
    steps = fingerprints(list(range(12)), [0] * 12, data)
    assert first_firing(create_rule("DataReplay", trial_factory(steps)), range(12)) is None
    assert first_firing(create_rule("DataReplay", trial_factory(steps), min_run="1"), range(12)) == 7
    # samples shuffled every epoch (a DistributedSampler with set_epoch): no batch comes back, epoch or not
    rng = np.random.default_rng(1)
    samples = rng.integers(0, 100, size=(32, 8))
    shuffled = [samples[rng.permutation(32)].reshape(8, 4, 8) for _ in range(4)]
    data = [b for epoch in shuffled for b in epoch]
    steps = fingerprints(list(range(32)), [None] * 32, data)
    assert first_firing(create_rule("DataReplay", trial_factory(steps)), range(32)) is None


def test_data_replay_fires_on_a_loader_stuck_on_one_batch(trial_factory):
    data = batches(10)
    order = [0, 1, 2, 3, 4, 4, 4, 4, 4]
    rule = create_rule("DataReplay", trial_factory(fingerprints(order, [0] * 9, data)))
    assert first_firing(rule, range(9)) == 7  # 5, 6, 7 repeat 4, 5, 6


def test_data_replay_refuses_bad_parameters():
    with pytest.raises(RuleParameterError, match="DataReplay.*min_run"):
        create_rule("DataReplay", None, min_run="0")
    with pytest.raises(RuleParameterError, match="DataReplay.*window"):
        create_rule("DataReplay", None, min_run="5", window="3")


# -- AttentionLogitGrowth ----------------------------------------------------------------------------------
def logit_trace(values: list[float], layer: str = "blocks.0.attn") -> dict[int, dict]:
    return {s: {f"scalar/attention_logit_max/{layer}": np.float32(v)} for s, v in enumerate(values)}


def test_attention_logit_growth_fires_after_num_steps_above_the_cap(trial_factory):
    values = [8.0 + 0.1 * s for s in range(20)] + [8.0 * 1.3**k for k in range(1, 20)]
    trial = trial_factory(logit_trace(values))
    rule = create_rule("AttentionLogitGrowth", trial)
    above = [s for s, v in enumerate(values) if v > 100]
    assert first_firing(rule, range(len(values))) == above[2]
    out = rule.evaluate(above[2])
    assert "blocks.0.attn: largest attention logit" in out.details
    assert out.values["criterion"] == "max_logit"
    grow = create_rule("AttentionLogitGrowth", trial, max_logit="0", growth_factor="4")
    over = [s for s, v in enumerate(values) if v > 4 * values[0]]
    assert first_firing(grow, range(len(values))) == over[2]


def test_attention_logit_growth_quiet_on_logits_that_stay_under_the_cap(trial_factory):
    rng = np.random.default_rng(0)
    values = list(20 + 60 * rng.random(60))  # large but bounded, one value of 99.9
    values[30] = 99.9
    values[40] = 150.0  # a single step above the cap is not growth
    rule = create_rule("AttentionLogitGrowth", trial_factory(logit_trace(values)))
    assert first_firing(rule, range(60)) is None


def test_attention_logit_growth_refuses_bad_parameters():
    with pytest.raises(RuleParameterError, match="AttentionLogitGrowth.*num_steps"):
        create_rule("AttentionLogitGrowth", None, num_steps="0")
    with pytest.raises(RuleParameterError, match="AttentionLogitGrowth.*max_logit"):
        create_rule("AttentionLogitGrowth", None, max_logit="-1")


@pytest.mark.parametrize("name", ["DataReplay", "AttentionLogitGrowth"])
def test_listed_configured_and_said_how_to_save(name, capsys):
    from tornasole.cli.main import main
    from tornasole.rules import rule_configs as rc
    from tornasole.rules.verdict import nothing_evaluated_details

    assert main(["rules", "list"]) == 0
    assert f"\n{name} " in capsys.readouterr().out
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    assert getattr(rc, snake)()["DebugRuleConfiguration"]["RuleParameters"] == {"rule_to_invoke": name}
    text = nothing_evaluated_details(name, name, {}, 3)
    assert ("record_batch" if name == "DataReplay" else "save_attention_logit_max") in text


# -- the PyTorch helpers write what the rules read -------------------------------------------------------
def test_record_batch_saves_exact_fingerprints_the_rule_reads_after_a_bad_resume(tmp_path):
    import torch

    import tornasole.pytorch as ts
    from tornasole.core.batch_fingerprint import fingerprint
    from tornasole.exceptions import ConfigurationError
    from tornasole.trials import create_trial

    data = [torch.randint(0, 50, (4, 8), generator=torch.Generator().manual_seed(i)) for i in range(6)]
    model = torch.nn.Embedding(50, 4)
    hook = ts.Hook(
        str(tmp_path / "run"), save_config=ts.SaveConfig(save_interval=1), stop_check_interval=None
    )
    hook.register_module(model)
    order = [0, 1, 2, 3, 4, 2, 3, 4]  # resumed at step 5 from the checkpoint of step 2, loader not restored
    for i in order:
        model(data[i])
        ts.record_batch(hook, {"input_ids": data[i], "mask": data[i] > 0}, epoch=0)
    with pytest.raises(ConfigurationError, match="record_batch: batch\\['x'\\] is a str"):
        ts.record_batch(hook, {"x": "text"})
    with pytest.raises(ConfigurationError, match="epoch must be a non-negative integer"):
        ts.record_batch(hook, data[0], epoch=-2)
    hook.close()
    trial = create_trial(str(tmp_path / "run"), collections_timeout=1.0, poll_interval=0.01)
    name = "batch_fingerprint/input"
    saved = [trial.tensor(name).value(s) for s in trial.steps()]
    assert saved[0].dtype == np.float64
    assert saved[0][1] == 0
    assert saved[5][0] == saved[2][0] != saved[1][0]
    assert 0 < saved[0][0] < 2**48
    assert int(saved[0][0]) == saved[0][0]
    single = fingerprint(data[0].numpy())
    assert single != saved[0][0]  # the dict's fingerprint covers the mask too
    assert first_firing(create_rule("DataReplay", trial), trial.steps()) == 7


def test_save_attention_logit_max_leaves_masked_logits_out(tmp_path):
    import torch

    import tornasole.pytorch as ts
    from tornasole.pytorch.llm_stats import attention_logit_max
    from tornasole.trials import create_trial

    logits = torch.tensor([[1.0, float("-inf")], [-7.5, 2.0]])
    assert attention_logit_max(logits) == 7.5
    assert attention_logit_max(torch.full((2, 2), float("-inf"))) is None
    model = torch.nn.Linear(2, 2)
    hook = ts.Hook(
        str(tmp_path / "run"), save_config=ts.SaveConfig(save_interval=1), stop_check_interval=None
    )
    hook.register_module(model)
    for step in range(8):
        model(torch.ones(1, 2))
        ts.save_attention_logit_max(hook, "blocks.0.attn", logits * (1 if step < 4 else 40))
    hook.close()
    trial = create_trial(str(tmp_path / "run"), collections_timeout=1.0, poll_interval=0.01)
    assert trial.tensor("attention_logit_max/blocks.0.attn").value(0).reshape(-1).tolist() == [7.5]
    assert first_firing(create_rule("AttentionLogitGrowth", trial), trial.steps()) == 6
