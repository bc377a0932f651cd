"""Step times from the Keras callback and XGBoost's rounds, quiet steps included, written as trace events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.frameworks.conftest import regression_data, tiny_model
from tornasole.core.save_config import SaveConfig
from tornasole.profiler.format import trace_events
from tornasole.profiler.sampling.config import ProfilerConfig


def _steps(root: Path, mode: str) -> list[trace_events.TraceEvent]:
    events = [
        e
        for f in sorted((root / "profiler-output" / "framework").rglob("*.json"))
        for e in trace_events.decode_trace_file(f.read_text()).events
    ]
    return sorted((e for e in events if e.phase == trace_events.step_phase(mode)), key=lambda e: e.start_us)


def test_keras_fit_and_evaluate_batches_are_steps(keras_tf, tmp_path: Path) -> None:
    keras, _ = keras_tf
    from tornasole.keras import Hook

    model = tiny_model(keras)
    x, y = regression_data()
    # saving every 3rd step: the steps between take the hook's quiet path, and are timed too
    hook = Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=3), profiler=ProfilerConfig(interval_ms=50)
    )
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    model.evaluate(x, y, batch_size=4, verbose=0, callbacks=[hook])
    hook.close()
    train, evaluation = _steps(tmp_path, "TRAIN"), _steps(tmp_path, "EVAL")
    batches = len(x) // 2
    assert [e.args["step_num"] for e in train] == [str(i) for i in range(batches)]
    assert [e.args["step_num"] for e in evaluation] == [str(i) for i in range(len(x) // 4)]
    assert all(e.duration_us > 0 for e in train + evaluation)
    assert all(a.end_us <= b.start_us for a, b in zip(train, train[1:]))


def test_xgboost_rounds_are_steps(tmp_path: Path) -> None:
    xgb = pytest.importorskip("xgboost")
    from tornasole.xgboost import Hook

    rng = np.random.default_rng(0)
    data = xgb.DMatrix(rng.normal(size=(200, 4)), label=rng.normal(size=200))
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=10), profiler=True)
    xgb.train({"max_depth": 2, "nthread": 1}, data, num_boost_round=25, callbacks=[hook])
    hook.close()
    rounds = _steps(tmp_path, "GLOBAL")
    assert [e.args["step_num"] for e in rounds] == [str(i) for i in range(25)]
    assert all(e.duration_us > 0 for e in rounds)
