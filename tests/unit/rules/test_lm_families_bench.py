"""The language-model families of the benchmark (bench/detection/families/lm.py) build what they say: the
labels come from the published thresholds fed the training's values, and a run saves the signals the LLM rules
read under the names of tornasole.core.llm_signals."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import lm  # noqa: E402

from tornasole.trials import create_trial  # noqa: E402


def _feed(monitor: lm.LmMonitor, step: int, **kw) -> None:
    args = {
        "loss": 1.0,
        "grad_norm": 1.0,
        "outputs_finite": True,
        "lr": 1e-3,
        "configured_lr": 1e-3,
        "scale": None,
        "overflow": False,
        "loads": [],
        "entropies": [1.0],
    }
    monitor.step(step, **{**args, **kw})


def test_every_failure_has_a_case_in_both_families_and_healthy_twins():
    kinds = {name: kind for name, (kind, _, _) in lm.LM_CASES.items()}
    for family in ("lm", "moe"):
        assert sum(1 for n, k in kinds.items() if n.startswith(family + "/") and k == "healthy") >= 4
        for fault in ("bad_batch", "lr_blowup", "grad_norm_spike", "nan_in_module", "fp16_scale_collapse"):
            assert kinds[f"{family}/{fault}"] == "broken"
    assert kinds["moe/dead_expert"] == "broken"


def test_olmo_loss_criterion_needs_a_full_window_and_six_sigma():
    m = lm.LmMonitor()
    rng = np.random.default_rng(0)
    for s in range(127):
        _feed(m, s, loss=1.0 + 0.01 * rng.standard_normal())
    _feed(m, 127, loss=1.5)  # 50 sigma, but only 127 values before it
    assert "loss_spike" not in m.labels
    _feed(m, 128, loss=1.5)
    assert m.labels["loss_spike"] == 128


def test_other_criteria_label_their_first_step():
    m = lm.LmMonitor()
    for s in range(20):
        _feed(m, s, grad_norm=1.0)
    _feed(m, 20, lr=1e-4, configured_lr=1e-3)  # the schedule said 1e-3
    _feed(m, 21, grad_norm=11.0)
    _feed(m, 22, scale=1.0, overflow=True)
    for s in range(23, 33):
        _feed(m, s, loads=[np.array([0.5, 0.5, 0.0])])
    _feed(m, 33, entropies=[0.01])
    assert m.labels == {
        "lr_discontinuity": 20,
        "grad_norm_spike": 21,
        "scale_collapse": 22,
        "dead_expert": 32,
        "attention_collapse": 33,
    }


def test_a_short_run_saves_the_llm_signals_and_labels_the_nan(tmp_path, monkeypatch):
    monkeypatch.setattr(lm, "STEPS", 12)
    _, _, spec = lm.LM_CASES["moe/nan_in_module"]
    result = lm.run(replace(spec, onset=8, fp16=True), 0, str(tmp_path))
    assert result.labels == {"non_finite": 8}
    trial = create_trial(str(tmp_path))
    names = set(trial.tensor_names())
    for wanted in (
        "scalar/lr/0",
        "scalar/grad_norm/total",
        "scalar/loss_scale",
        "scalar/skipped_step",
        "router/blocks.1.mlp/expert_load",
        "attention_entropy/blocks.0.attn",
        "blocks.1.attn_output_0",
    ):
        assert wanted in names, wanted
    assert trial.saved_order(8).index("blocks.0.attn_output_0") < trial.saved_order(8).index(
        "blocks.1.mlp_output_0"
    )


def test_logit_cap_and_a_sample_read_twice_in_an_epoch_label_their_first_step():
    m = lm.LmMonitor()
    ids = np.arange(4)
    _feed(m, 0, logit_maxima=[12.0], samples=(0, ids))
    _feed(m, 1, logit_maxima=[99.0], samples=(0, ids + 4))
    _feed(m, 2, samples=(1, ids))  # a new epoch reads the same samples: its own first reading
    assert m.labels == {}
    _feed(m, 3, logit_maxima=[101.0], samples=(1, ids + 1))  # sample 1 again in epoch 1
    assert m.labels == {"attention_logit_growth": 3, "data_replay": 3}


def test_the_loader_reads_each_sample_once_an_epoch_and_a_bad_resume_starts_it_over():
    loader = lm.Loader(0, batches=3, shuffle=True)
    epochs = [[loader.next() for _ in range(3)] for _ in range(2)]
    for epoch, batches in enumerate(epochs):
        assert sorted(int(i) for _, ids, e in batches for i in ids) == list(range(3 * lm.BATCH))
        assert {e for _, _, e in batches} == {epoch}
    assert not np.array_equal(epochs[0][0][1], epochs[1][0][1])  # reshuffled every epoch
    kinds = {name: kind for name, (kind, _, _) in lm.LM_CASES.items()}
    for family in ("lm", "moe"):
        for case in ("healthy_multi_epoch", "healthy_multi_epoch_unshuffled", "healthy_clean_resume"):
            assert kinds[f"{family}/{case}"] == "healthy"
        for case in ("data_replay_after_resume", "data_replay_no_epoch", "attention_logit_growth"):
            assert kinds[f"{family}/{case}"] == "broken"


def test_a_short_resumed_run_saves_fingerprints_and_logit_maxima_and_labels_the_replay(tmp_path, monkeypatch):
    monkeypatch.setattr(lm, "STEPS", 12)
    _, _, spec = lm.LM_CASES["lm/data_replay_after_resume"]
    result = lm.run(replace(spec, onset=8, dataset_batches=5), 0, str(tmp_path))
    assert result.labels == {"data_replay": 8}  # position 3 of epoch 1 restarts at 0: samples seen at step 5
    trial = create_trial(str(tmp_path))
    fp = [trial.tensor("batch_fingerprint/input").value(s) for s in range(12)]
    assert fp[8][0] == fp[5][0]
    assert [int(f[1]) for f in fp] == [0] * 5 + [1] * 7  # epoch 1 started over at step 8
    assert float(trial.tensor("attention_logit_max/blocks.1.attn").value(3).reshape(-1)[0]) > 0
