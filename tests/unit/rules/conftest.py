"""Build small trials for rule tests with our format writer (one worker, end marker written).

``trial_factory(steps, collections)`` writes ``steps`` — ``{step: {tensor: value}}``
or ``{step: (mode, mode_step, {tensor: value})}`` — and collections
``{name: [include regexes]}`` into a fresh temporary directory and returns the
opened trial.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tornasole.core.collection import Collection
from tornasole.format.writer import TrialWriter
from tornasole.modes import GLOBAL
from tornasole.trials import create_trial

DEFAULT_COLLECTIONS = {
    "gradients": ["^gradients/"],
    "weights": ["^weights/"],
    "losses": ["^loss"],
}


def write_trial(
    path: str,
    steps: dict[int, Any],
    collections: dict[str, list[str]] | None = None,
    end: bool = True,
) -> str:
    tw = TrialWriter(path)
    colls = DEFAULT_COLLECTIONS if collections is None else collections
    tw.write_collections(
        {name: Collection(name, include_regex=list(rx)).to_json_dict() for name, rx in colls.items()}, 1
    )
    for step in sorted(steps):
        spec = steps[step]
        mode, mode_step, tensors = spec if isinstance(spec, tuple) else (GLOBAL, step, spec)
        sw = tw.step_writer(step, mode=mode, mode_step=mode_step)
        for name, value in tensors.items():
            sw.add_tensor(name, np.asarray(value), wall_time=1000.0 + step)
        tw.write_step(sw)
    if end:
        tw.write_end_marker()
    return path


@pytest.fixture
def trial_factory(tmp_path) -> Callable[..., Any]:
    counter = iter(range(1000))

    def make(steps: dict[int, Any], collections: dict[str, list[str]] | None = None, end: bool = True):
        path = str(tmp_path / f"trial{next(counter)}")
        write_trial(path, steps, collections, end)
        return create_trial(path, collections_timeout=0.1, poll_interval=0.01)

    return make
