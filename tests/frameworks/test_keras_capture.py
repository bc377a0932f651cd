"""Capture on demand in the Keras hook: a request makes the next N training batches save full weights and
gradients, whatever the save config, through the same polling as the stop signal's."""

from __future__ import annotations

from tests.frameworks.conftest import regression_data, tiny_model
from tornasole.core.save_config import SaveConfig
from tornasole.format.capture_request import CaptureRequest, capture_request_file_name
from tornasole.hooks.capture_window import CaptureRequestPoller
from tornasole.storage.schemes import get_storage
from tornasole.trials import create_trial

W1, G1 = "weights/net/d1/kernel", "gradients/net/d1/kernelGrad"


def test_a_request_saves_full_weights_and_gradients_of_the_next_batches(keras_tf, tmp_path):
    keras, _ = keras_tf
    from tornasole.keras import Hook

    hook = Hook(
        str(tmp_path),
        save_config=SaveConfig(save_interval=1000),
        include_collections=["weights", "gradients"],
        stop_check_interval=None,
        capture_check_interval=None,
    )
    hook._capture_poller = CaptureRequestPoller(get_storage(str(tmp_path)), str(tmp_path))  # polled below
    model = tiny_model(keras)
    x, y = regression_data()
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[hook])  # warms up: steps from 0
    path = tmp_path / capture_request_file_name("R")
    path.parent.mkdir(parents=True)
    path.write_bytes(CaptureRequest("job:1:capture/R", 2, ("gradients", "weights"), rule="R").encode())
    assert hook._capture_poller.check_now() == 1
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    captured = hook._capture_window.captured_steps
    assert len(captured) == 2
    trial = create_trial(str(tmp_path))
    assert trial.tensor(W1).steps() == [0, *captured]
    assert trial.tensor(G1).steps() == [0, *captured]
    assert trial.tensor(W1).value(captured[0]).shape == (4, 3)
