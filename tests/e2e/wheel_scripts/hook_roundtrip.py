"""Run by the wheel tests inside a clean venv: a hook writes, ``create_trial`` reads back, values compared.

Usage: python hook_roundtrip.py OUT_DIR   (a local directory or an s3:// trial path)
Exits non-zero with the mismatch on stderr; prints one line with the versions on success.
"""

import sys

import google.protobuf
import numpy as np

from tornasole import Hook, ReductionConfig, SaveConfig, modes
from tornasole.trials import create_trial

out_dir = sys.argv[1]
values = {
    "w32": lambda s: np.arange(12, dtype=np.float32).reshape(3, 4) * (s + 1),
    "w16": lambda s: np.full(5, s + 0.5, dtype=np.float16),
    "i64": lambda s: np.arange(4, dtype=np.int64) - s,
}
with Hook(
    out_dir,
    save_config=SaveConfig(save_interval=2),
    reduction_config=ReductionConfig(reductions=["max"], norms=["l2"], save_raw_tensor=True),
    stop_check_interval=None,
) as hook:
    hook.set_mode(modes.TRAIN)
    for step in range(6):
        for name, make in values.items():
            hook.save_tensor(name, make(step))
        hook.save_scalar("loss", 1.0 / (step + 1))
        hook.next_step()

trial = create_trial(out_dir)
assert trial.steps() == [0, 2, 4], trial.steps()
assert trial.steps(mode=modes.TRAIN) == [0, 2, 4], trial.steps(mode=modes.TRAIN)
for name, make in values.items():
    for step in (0, 2, 4):
        got, want = trial.tensor(name).value(step), make(step)
        assert got.dtype == want.dtype, (name, step, got.dtype)
        assert np.array_equal(got, want), (name, step, got, want)
    assert trial.tensor(name).reduction_value(4, "max") == want.max(), name
    assert np.isclose(trial.tensor(name).reduction_value(4, "l2", abs=False), np.linalg.norm(want)), name
assert np.isclose(trial.tensor("scalar/loss").value(2), 1.0 / 3), trial.tensor("scalar/loss").value(2)
print(f"roundtrip ok numpy={np.__version__} protobuf={google.protobuf.__version__}")
