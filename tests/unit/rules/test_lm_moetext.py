"""The held-out mixture-of-experts family (bench/detection/families/moetext.py) builds what it says: real
English text from Python's own pydoc topics, Switch top-1 and Mixtral top-2 routing with the bugs of its
cases, the signals saved under the names the LLM rules read (the routers' loads included), the router-stretch
statistics and ``harmful`` from the validation losses."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import moetext  # noqa: E402

from tornasole.trials import create_trial  # noqa: E402


def test_cases_healthy_and_broken_each_documented():
    kinds = [kind for kind, _, _ in moetext.CASES.values()]
    assert kinds.count("healthy") >= 8
    assert kinds.count("broken") >= 8
    assert moetext.CASES["healthy"][1] == moetext.MoeSpec()
    assert moetext.CASES["healthy_top2"][1].top_k == 2
    for name, (_, _, why) in moetext.CASES.items():
        assert len(why) > 20, name
    for name, why in moetext.FAULTS.items():
        assert len(why) > 60, name
    assert all(
        name.startswith("healthy") == (kind == "healthy") for name, (kind, _, _) in moetext.CASES.items()
    )


def test_corpus_is_pydoc_topics_and_the_loader_reads_each_window_once_an_epoch():
    info = moetext.corpus_info()
    assert info["corpus_chars"] > 400_000
    assert len(info["corpus_sha256"]) == 64
    train, val = moetext.splits()
    assert len(train) > 8 * len(val)
    assert 2.5 < moetext.unigram_entropy() < 4.0
    assert moetext.val_windows().shape == (moetext.VAL_WINDOWS, moetext.CTX + 1)
    loader = moetext.Loader(0, batch=16)
    loader.windows = loader.windows[:160]
    loader.batches = 10
    epochs = [[loader.next() for _ in range(10)] for _ in range(2)]
    for epoch, batches in enumerate(epochs):
        ids = sorted(int(i) for _, b, _ in batches for i in b)
        assert ids == list(range(160))
        assert {e for _, _, e in batches} == {epoch}


def test_switch_capacity_drops_and_off_by_one_and_top2_gates():
    import torch

    torch.manual_seed(0)
    _, symbols, _ = moetext.corpus()
    x = torch.randn(4, moetext.CTX, moetext.DIM)
    for spec, dropped in (
        (moetext.MoeSpec(capacity=0.1), lambda d: d > 0.8),
        (moetext.MoeSpec(capacity=None), lambda d: d == 0),
        (moetext.MoeSpec(top_k=2, capacity=None), lambda d: d == 0),
    ):
        moe = moetext._model_class()(len(symbols), spec).blocks[0].moe
        out = moe(x)
        assert out.shape == x.shape
        assert dropped(moe.dropped), (spec, moe.dropped)
        assert moe.aux.requires_grad
    bug = moetext._model_class()(len(symbols), moetext.MoeSpec(dispatch_off_by_one=True, capacity=None))
    moe = bug.blocks[0].moe
    with torch.no_grad():
        moe.router.bias[:] = torch.tensor([0.0] * 7 + [50.0])  # every token to the last expert
    assert float(moe(x).abs().max()) == 0.0  # which never runs
    detached = moetext._model_class()(len(symbols), moetext.MoeSpec(detach_gates=True)).blocks[0].moe
    detached(x).sum().backward()
    assert detached.router.weight.grad is None or float(detached.router.weight.grad.abs().max()) == 0.0


def test_longest_stretches_of_an_idle_and_a_starved_expert():
    fair = np.array([0.25, 0.25, 0.25, 0.25])
    idle = np.array([0.5, 0.3, 0.2, 0.0])
    starved = np.array([0.5, 0.3, 0.19, 0.01])
    loads = [[fair]] * 3 + [[idle]] * 4 + [[starved]] * 2 + [[fair]] * 3
    st = moetext.longest_stretches(loads)
    assert st["zero"] == {"length": 4, "start": 3, "layer": 0, "expert": 3}
    assert st["starved"] == {"length": 6, "start": 3, "layer": 0, "expert": 3}
    assert moetext.longest_stretches([[fair]] * 5)["zero"]["length"] == 0


def test_harmful_is_worse_than_the_worst_healthy_of_its_seed_by_the_margin():
    recs = [
        {"kind": "healthy", "seed": 0, "val_loss": 2.0, "non_finite": False},
        {"kind": "healthy", "seed": 0, "val_loss": 2.1, "non_finite": False},
        {"kind": "broken", "seed": 0, "val_loss": 2.1 + moetext.HARM_MARGIN - 0.01, "non_finite": False},
        {"kind": "broken", "seed": 0, "val_loss": 2.1 + moetext.HARM_MARGIN + 0.01, "non_finite": False},
        {"kind": "broken", "seed": 0, "val_loss": 1.0, "non_finite": True},
        {"kind": "broken", "seed": 1, "val_loss": float("nan"), "non_finite": False},
    ]
    moetext.mark_harmful(recs)
    assert [r["harmful"] for r in recs] == [False, False, False, True, True, True]


def test_a_short_resume_without_the_loader_saves_the_signals_and_labels_the_replay(tmp_path, monkeypatch):
    monkeypatch.setattr(moetext, "ONSET", 3)
    monkeypatch.setattr(moetext, "VAL_WINDOWS", 32)
    _, spec, _ = moetext.CASES["resume_replays_loader"]
    result = moetext.run(replace(spec, batch=4), 0, str(tmp_path), steps=5)
    assert result.labels.get("data_replay") == 3
    assert math.isfinite(result.val_loss)
    assert not result.non_finite
    assert result.record["python"].count(".") == 2
    assert set(result.record["router_stretch"]) == {"zero", "starved"}
    trial = create_trial(str(tmp_path))
    names = set(trial.tensor_names())
    for wanted in (
        "loss_output_0",
        "scalar/lr/0",
        "scalar/lr/2",
        "scalar/grad_norm/total",
        "router/blocks.0.moe/expert_load",
        "router/blocks.1.moe/expert_load",
        "attention_entropy/blocks.1.attn",
        "attention_logit_max/blocks.0.attn",
    ):
        assert wanted in names, wanted
    assert any("batch_fingerprint" in n for n in names)
    assert trial.tensor_names(collection="gradients")
    assert trial.steps() == list(range(5))
    load = np.asarray(trial.tensor("router/blocks.0.moe/expert_load").value(4))
    assert load.shape == (moetext.EXPERTS,)
    assert math.isclose(float(load.sum()), 1.0, rel_tol=1e-6)
