"""End to end with Keras: broken Keras runs make the local evaluator's rules fire; the healthy twin does not.

``tornasole local up`` runs the serverless pipeline against a local endpoint;
three jobs are registered with ExplodingTensor and VanishingGradient, and one
training script (one TensorFlow import) trains three small Keras models into
their S3 prefixes: a learning rate far too high, a 12-layer sigmoid stack, and
the healthy twin of both.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.e2e.test_cli_local_pipeline import _cli, local_up  # noqa: F401 - the fixture is used by name

TRAINING_SCRIPT = textwrap.dedent(
    """
    import os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np
    import keras
    from tornasole.keras import Hook, SaveConfig

    def train(out, activation, hidden, lr):
        keras.utils.set_random_seed(0)
        layers = [keras.Input((4,))] + [keras.layers.Dense(h, activation=activation) for h in hidden]
        model = keras.Sequential(layers + [keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
        rng = np.random.default_rng(0)
        x = rng.random((32, 4), dtype=np.float32)
        y = x @ np.array([[1.0], [-2.0], [0.5], [3.0]], dtype=np.float32)
        colls = ["weights", "gradients"]
        hook = Hook(out, save_config=SaveConfig(save_interval=2), include_collections=colls)
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
        hook.close()

    base = sys.argv[1]
    train(base + "/keras-exploding", "relu", (8, 8), 1e9)
    train(base + "/keras-vanishing", "sigmoid", (4,) * 12, 0.01)
    train(base + "/keras-healthy", "relu", (8, 8), 0.01)
    """
)
EXPECTED = {
    "keras-exploding": {"ExplodingTensor": "IssuesFound"},
    "keras-vanishing": {"ExplodingTensor": "NoIssuesFound", "VanishingGradient": "IssuesFound"},
    "keras-healthy": {"ExplodingTensor": "NoIssuesFound", "VanishingGradient": "NoIssuesFound"},
}


def _verdicts(env: dict[str, str], job: str) -> dict[str, str] | None:
    status = _cli(env, "jobs", "status", job)
    assert status.returncode == 0, status.stderr
    if f"job {job}: Completed" not in status.stdout:
        return None
    table = status.stdout.partition("\n\nwhat to do:\n")[0]  # the rules' advice follows the table
    return {line.split()[0]: line.split()[1] for line in table.splitlines()[3:] if line.strip()}


def test_broken_keras_runs_fire_through_the_local_mode(local_up, tmp_path: Path) -> None:  # noqa: F811
    _, env = local_up
    base = f"s3://{env['TORNASOLE_TRIAL_BUCKET']}"
    for job in EXPECTED:
        reg = _cli(
            env,
            "jobs",
            "register",
            "--name",
            job,
            "--s3-output",
            f"{base}/{job}",
            "--rule",
            "ExplodingTensor",
            "--rule",
            "VanishingGradient",
        )
        assert reg.returncode == 0, reg.stderr
    script = tmp_path / "train.py"
    script.write_text(TRAINING_SCRIPT)
    train = subprocess.run(
        [sys.executable, str(script), base], env=env, capture_output=True, text=True, timeout=300
    )
    assert train.returncode == 0, train.stderr[-3000:]

    results: dict[str, dict[str, str]] = {}
    deadline = time.monotonic() + 180
    while len(results) < len(EXPECTED) and time.monotonic() < deadline:
        for job in EXPECTED:
            if job not in results and (v := _verdicts(env, job)) is not None:
                results[job] = v
        time.sleep(1)
    missing = sorted(set(EXPECTED) - set(results))
    assert not missing, "not completed:\n" + "\n".join(_cli(env, "jobs", "status", j).stdout for j in missing)
    for job, expected in EXPECTED.items():
        assert {rule: results[job][rule] for rule in expected} == expected, (job, results[job])
