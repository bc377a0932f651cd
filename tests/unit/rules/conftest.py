"""``trial_factory``: write a small trial (see ``rules_helpers.write_trial``) in tmp and open it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rules_helpers import write_trial

from tornasole.trials import create_trial


@pytest.fixture
def trial_factory(tmp_path) -> Callable[..., Any]:
    counter = iter(range(1000))

    def make(steps: dict[int, Any], collections: dict[str, list[str]] | None = None, end: bool = True):
        path = str(tmp_path / f"trial{next(counter)}")
        write_trial(path, steps, collections, end)
        return create_trial(path, collections_timeout=0.1, poll_interval=0.01)

    return make
