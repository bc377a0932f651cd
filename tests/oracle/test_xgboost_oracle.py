"""smdebug 1.0.34 reads the tree the XGBoost hook writes (every collection), value for value as we do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_reader_differential import _compare
from trial_dump import dump_with_ours, dump_with_smdebug


def _write_xgboost_tree(out: Path) -> None:
    import xgboost as xgb

    from tornasole.xgboost import Hook, SaveConfig

    rng = np.random.default_rng(0)
    x = rng.random((120, 4))
    y = (x[:, 0] + x[:, 1] > 1).astype(np.float32)
    dtrain, dval = xgb.DMatrix(x[:80], label=y[:80]), xgb.DMatrix(x[80:], label=y[80:])
    params = {"max_depth": 2, "objective": "binary:logistic", "eval_metric": ["logloss", "auc"]}
    hook = Hook(
        str(out),
        save_config=SaveConfig(save_interval=2),
        include_collections=[
            "metrics",
            "losses",
            "feature_importance",
            "predictions",
            "labels",
            "trees",
            "average_shap",
            "full_shap",
            "hyperparameters",
        ],
        hyperparameters=params,
        train_data=dtrain,
        validation_data=dval,
    )
    xgb.train(
        params,
        dtrain,
        4,
        evals=[(dtrain, "train"), (dval, "validation")],
        callbacks=[hook],
        verbose_eval=False,
    )
    hook.close()


def test_smdebug_reads_the_xgboost_tree_as_we_do(tmp_path: Path) -> None:
    root = tmp_path / "xgboost"
    _write_xgboost_tree(root)
    inputs = {
        "path": str(root),
        "workers": ["worker_0"],
        "reductions": [],
        "shapes": [],
        "mode_values": False,
    }
    theirs = dump_with_smdebug(inputs)
    ours = dump_with_ours(inputs)
    assert theirs.data["steps"] == [0, 2]
    names = set(theirs.data["tensor_names"])
    assert {
        "validation-auc",
        "train-logloss",
        "predictions",
        "labels",
        "trees/Node",
        "trees/Feature",
        "feature_importance/gain/f0",
        "average_shap/f0",
        "full_shap/f0",
        "hyperparameters/max_depth",
    } <= names
    assert "validation-auc" not in theirs.data["names_in_collection"]["losses"]
    problems = _compare(ours, theirs, set())
    assert not problems, "\n".join(problems[:40])
