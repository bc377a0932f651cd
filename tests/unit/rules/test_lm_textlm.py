"""The held-out text LM family (bench/detection/families/textlm.py) builds what it says: real English text
from Python's own pydoc topics, a loader that reads each window once an epoch, a resume that forgets the
loader replays samples, the signals saved under the names the LLM rules read, and ``harmful`` from the
validation losses."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "detection"))

from families import textlm  # noqa: E402

from tornasole.trials import create_trial  # noqa: E402


def test_cases_healthy_and_broken_each_fault_documented():
    kinds = [kind for kind, _, _ in textlm.CASES.values()]
    assert kinds.count("healthy") >= 8
    assert kinds.count("broken") >= 10
    assert textlm.CASES["healthy"][1] == textlm.TextSpec()
    for name, why in textlm.FAULTS.items():
        assert len(why) > 30, name
    assert all(
        name.startswith("healthy") == (kind == "healthy") for name, (kind, _, _) in textlm.CASES.items()
    )


def test_corpus_is_pydoc_topics_and_the_loader_reads_each_window_once_an_epoch():
    info = textlm.corpus_info()
    assert info["corpus_chars"] > 400_000
    assert 90 <= info["vocab"] <= 120
    assert len(info["corpus_sha256"]) == 64
    train, val = textlm.splits()
    assert len(train) > 8 * len(val)
    assert 2.5 < textlm.unigram_entropy() < 4.0
    assert textlm.val_windows().shape == (textlm.VAL_WINDOWS, textlm.CTX + 1)
    loader = textlm.Loader(0, batch=16, fraction=0.02)
    n = loader.batches
    epochs = [[loader.next() for _ in range(n)] for _ in range(2)]
    for epoch, batches in enumerate(epochs):
        ids = sorted(int(i) for _, b, _ in batches for i in b)
        assert len(ids) == len(set(ids)) == n * 16
        assert {e for _, _, e in batches} == {epoch}
    w, _, _ = epochs[0][0]
    assert w.shape == (16, textlm.CTX + 1)
    for kind in ("binary", "repeated"):
        bad = textlm.corrupted_batch(kind, 3, 8)
        assert bad.shape == (8, textlm.CTX + 1)
        assert bad.min() >= 0
        assert bad.max() < info["vocab"]


def test_the_schedule_warms_up_decays_and_restarts_when_configured():
    spec = textlm.TextSpec()
    assert math.isclose(textlm.schedule(spec, textlm.WARMUP - 1), textlm.PEAK_LR)
    last = textlm.schedule(spec, textlm.STEPS - 1)
    assert math.isclose(last, textlm.PEAK_LR * textlm.MIN_RATIO, rel_tol=1e-3)
    sgdr = textlm.CASES["healthy_sgdr"][1]
    lrs = [textlm.schedule(sgdr, s) for s in range(textlm.STEPS)]
    jumps = sum(1 for a, b in zip(lrs[textlm.WARMUP :], lrs[textlm.WARMUP + 1 :]) if b > 2 * a)
    assert jumps == 2


def test_harmful_is_worse_than_the_worst_healthy_of_its_seed_by_the_margin():
    recs = [
        {"kind": "healthy", "seed": 0, "val_loss": 2.0, "non_finite": False},
        {"kind": "healthy", "seed": 0, "val_loss": 2.1, "non_finite": False},
        {"kind": "broken", "seed": 0, "val_loss": 2.1 + textlm.HARM_MARGIN - 0.01, "non_finite": False},
        {"kind": "broken", "seed": 0, "val_loss": 2.1 + textlm.HARM_MARGIN + 0.01, "non_finite": False},
        {"kind": "broken", "seed": 0, "val_loss": 1.0, "non_finite": True},
        {"kind": "broken", "seed": 1, "val_loss": float("nan"), "non_finite": False},
    ]
    textlm.mark_harmful(recs)
    assert [r["harmful"] for r in recs] == [False, False, False, True, True, True]


def test_a_short_resume_without_the_loader_saves_the_signals_and_labels_the_replay(tmp_path, monkeypatch):
    monkeypatch.setattr(textlm, "ONSET", 3)
    monkeypatch.setattr(textlm, "VAL_WINDOWS", 32)
    _, spec, _ = textlm.CASES["resume_forgets_loader"]
    result = textlm.run(replace(spec, batch=4), 0, str(tmp_path), steps=5)
    assert result.labels == {"data_replay": 3}
    assert math.isfinite(result.val_loss)
    assert not result.non_finite
    assert result.record["python"].count(".") == 2
    trial = create_trial(str(tmp_path))
    names = set(trial.tensor_names())
    for wanted in (
        "loss_output_0",
        "scalar/lr/0",
        "scalar/lr/1",
        "scalar/grad_norm/total",
        "attention_entropy/blocks.2.attn",
        "attention_logit_max/blocks.0.attn",
    ):
        assert wanted in names, wanted
    assert any("batch_fingerprint" in n for n in names)
    assert trial.tensor_names(collection="gradients")
    assert trial.steps() == list(range(5))
    assert np.isfinite(np.asarray(trial.tensor("scalar/lr/0").value(4))).all()
