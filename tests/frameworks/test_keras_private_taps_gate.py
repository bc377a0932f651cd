"""The Keras hook's taps on private Keras attributes run only on the releases they were checked against
(:mod:`tornasole.keras.versions`): on another release they save nothing and say so once, the rest of
the hook saves as before, and ``TORNASOLE_KERAS_UNCHECKED=1`` turns them on to check a release."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from tests.frameworks.conftest import regression_data, tiny_model
from tornasole import config
from tornasole.core.save_config import SaveConfig
from tornasole.keras import versions
from tornasole.trials import create_trial

UNRELEASED = "3.99.0"


@pytest.fixture
def unchecked_release(monkeypatch):
    """The installed Keras reads as a release outside the table; the once-per-release notes forgotten."""
    monkeypatch.setattr(versions, "installed_keras", lambda: UNRELEASED)
    monkeypatch.setattr(versions, "_warned", set())
    monkeypatch.delenv(config.KERAS_UNCHECKED, raising=False)


def _fit(keras, out, collections):
    from tornasole.keras import Hook

    model = tiny_model(keras, hidden=(3,))
    x, y = regression_data(16)
    hook = Hook(str(out), save_config=SaveConfig(save_interval=1), include_collections=list(collections))
    hook.get_collection("loss_inputs").include(r"^(predictions|labels)$|^batch_loss/")
    hook.get_collection("relu_out").include(r"d1/outputs$")
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    tapped = "call" in model._compile_loss.__dict__ or "call" in model.get_layer("d1").__dict__
    hook.close()
    return set(create_trial(str(out)).tensor_names()), tapped


ALL = ("losses", "weights", "gradients", "loss_inputs", "relu_out")


def test_checked_release_saves_what_the_private_taps_see(keras_tf, tmp_path):
    keras, _ = keras_tf
    assert versions.installed_keras() in versions.CHECKED_KERAS  # the pinned Keras is a checked one
    names, _ = _fit(keras, tmp_path, ALL)
    assert {"predictions", "labels", "batch_loss/MeanSquaredError", "d1/outputs"} <= names


def test_unchecked_release_saves_the_rest_and_warns_once(keras_tf, tmp_path, unchecked_release, caplog):
    keras, _ = keras_tf
    with caplog.at_level(logging.WARNING, logger="tornasole.keras.versions"):
        names, tapped = _fit(keras, tmp_path / "a", ALL)
        _fit(keras, tmp_path / "b", ALL)  # a second run in the same process: no second warning
    assert not tapped  # nothing of Keras's private attributes was wrapped
    assert not {"predictions", "labels", "batch_loss/MeanSquaredError"} & names
    assert not [n for n in names if n.endswith("/outputs")]
    # what needs no private attribute is saved as on a checked release
    assert {"loss", "weights/net/d1/kernel", "gradients/net/d1/kernelGrad"} <= names
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings  # one per tap, once per release
    joined = "\n".join(warnings)
    for part in (UNRELEASED, "predictions, labels and batch_loss", "layer inputs and outputs"):
        assert part in joined
    assert config.KERAS_UNCHECKED in joined
    assert "make check-keras-versions" in joined


def test_unchecked_release_saving_no_tapped_value_says_nothing(keras_tf, tmp_path, unchecked_release, caplog):
    keras, _ = keras_tf
    with caplog.at_level(logging.WARNING, logger="tornasole.keras.versions"):
        names, _ = _fit(keras, tmp_path, ("losses", "weights"))
    assert names
    assert not [r for r in caplog.records if r.name == "tornasole.keras.versions"]


def test_environment_turns_the_private_taps_on_to_check_a_release(
    keras_tf, tmp_path, unchecked_release, monkeypatch, caplog
):
    keras, _ = keras_tf
    monkeypatch.setenv(config.KERAS_UNCHECKED, "1")
    with caplog.at_level(logging.WARNING, logger="tornasole.keras.versions"):
        names, _ = _fit(keras, tmp_path, ALL)
    assert {"predictions", "labels", "batch_loss/MeanSquaredError", "d1/outputs"} <= names
    assert not [r for r in caplog.records if r.name == "tornasole.keras.versions"]


def test_unknown_tap_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown private Keras tap 'optimizer'"):
        versions.private_tap_enabled("optimizer", "3.15.1")


def test_the_pinned_keras_is_a_checked_release():
    """requirements/frameworks.txt pins the Keras the suite runs on: it must be in the table, else the
    suite would test the hook with its private taps off."""
    pins = (Path(__file__).parents[2] / "requirements" / "frameworks.txt").read_text()
    pinned = re.search(r"^keras==(\S+)", pins, re.M)
    assert pinned is not None
    assert pinned.group(1) in versions.CHECKED_KERAS
