"""The held-out code mixture-of-experts family (bench/detection/families/codemoe.py) builds what it says: the
stdlib corpus and its split, the loader's epochs and state, top-2 routing with a capacity, a short run that
saves the LLM signals, and the labels and harm criterion."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import codemoe  # noqa: E402

from tornasole.trials import create_trial  # noqa: E402


def test_cases_cover_healthy_and_broken_and_cite_their_faults():
    kinds = [kind for kind, _, _ in codemoe.CODEMOE_CASES.values()]
    assert kinds.count("healthy") == 8
    assert kinds.count("broken") >= 9
    assert codemoe.CODEMOE_CASES["healthy"][1] == codemoe.CodeMoeSpec()
    for name, (kind, _, why) in codemoe.CODEMOE_CASES.items():
        if kind == "broken":
            assert any(ch.isdigit() for ch in why) or "docs" in why or "recipe" in why, name


def test_corpus_is_stdlib_source_split_by_file():
    train, val, sha = codemoe.corpus()
    assert len(sha) == 64
    assert len(train) > 4 * len(val) > 0
    assert b"def " in train
    assert b"def " in val
    assert list(codemoe.MODULES) == sorted(codemoe.MODULES)
    assert 2.5 < codemoe.unigram_entropy(val) < math.log(256)
    w = codemoe.windows(train)
    assert w.shape[1] == codemoe.SEQ + 1
    assert w.max() < 256
    assert codemoe.val_windows(val).shape == (codemoe.VAL_WINDOWS, codemoe.SEQ + 1)


def test_loader_reads_each_window_once_an_epoch_and_restores_its_position():
    samples = np.arange(40).reshape(20, 2)
    loader = codemoe.Loader(samples, 0, 4)
    seen = [loader.next() for _ in range(5)]
    assert sorted(int(i) for _, ids, _ in seen for i in ids) == list(range(20))
    assert {e for _, _, e in seen} == {0}
    assert loader.epoch == 1
    loader.next()
    again = codemoe.Loader(samples, 0, 4)
    again.load_state_dict(loader.state_dict())
    assert (again.next()[1] == loader.next()[1]).all()


def test_schedule_warms_up_then_decays_linearly_to_a_tenth():
    assert codemoe.lr_factor(0) == pytest.approx(1 / codemoe.WARMUP)
    assert codemoe.lr_factor(codemoe.WARMUP) == pytest.approx(1.0)
    assert codemoe.lr_factor(codemoe.STEPS) == pytest.approx(codemoe.FINAL_FRACTION)


def test_top2_routing_drops_tokens_over_capacity():
    import torch

    torch.manual_seed(0)
    model = codemoe._model_class()(4, 0.5)
    moe = model.blocks[0].moe
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[0] = 1.0  # every token's first choice is expert 0 (x summed > 0 mostly)
        out = moe(torch.ones(1, 32, codemoe.DIM))
    assert out.shape == (1, 32, codemoe.DIM)
    assert moe.dropped > 0.5  # capacity 0.5 * 32 * 2 / 4 = 8 tokens an expert, 64 choices on 2 experts


def test_harm_criterion():
    assert codemoe.harmful(float("nan"), 2.0)
    assert codemoe.harmful(2.0 + codemoe.HARMFUL_MARGIN + 0.01, 2.0)
    assert not codemoe.harmful(2.05, 2.0)


def test_a_short_run_saves_the_llm_signals(tmp_path):
    spec = replace(codemoe.CODEMOE_CASES["healthy_fp16_scaler"][1], resume="no_scheduler", onset=4)
    r = codemoe.run(spec, 0, str(tmp_path), steps=6)
    assert r.labels.get("lr_discontinuity") == 4  # the restarted warmup departs from the schedule
    assert math.isfinite(r.final_val_loss)
    assert len(r.corpus_sha256) == 64
    assert r.python
    names = set(create_trial(str(tmp_path)).tensor_names())
    for expected in (
        "loss_output_0",
        "scalar/lr/0",
        "scalar/lr/1",
        "scalar/grad_norm/total",
        "scalar/loss_scale",
        "scalar/skipped_step",
        "router/blocks.0.moe/expert_load",
        "attention_entropy/blocks.1.attn",
        "attention_logit_max/blocks.1.attn",
    ):
        assert any(n == expected or n.endswith(expected) for n in names), (expected, sorted(names)[-12:])
    assert any(n.startswith("batch_fingerprint/") for n in names)
