"""Statistics mode inside ``torch.compile``: no graph break, no recompile, the values eager training saves.

The hook's module hooks are traced into the compiled region, where they
constant-fold to nothing (``torch.compiler.is_compiling()``); the steps come
from the optimizer's step hooks, which run in eager. Measured with dynamo's
own counters against the same model compiled without the hook, and with
the ``fail_on_recompile`` stance after the first step. The ``aot_eager`` backend runs dynamo and
AOTAutograd as inductor would, without a C++ build per test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch._dynamo
from torch import nn
from torch._dynamo.utils import counters

import tornasole.pytorch as ts
from tests.frameworks.pytorch_lm import TinyLM, lm_batch
from tornasole.trials import create_trial

STEPS = 4


def _train(out: Path | None, *, compiled: bool, statistics=True, in_place: bool = False) -> dict[str, int]:
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = TinyLM()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    hook = None
    if out is not None:
        hook = ts.Hook(str(out), statistics=statistics)
        hook.register_module(model)
        hook.register_loss(loss_fn)
        hook.register_optimizer(opt)
    run = model
    if compiled and in_place:
        model.compile(backend="aot_eager")  # nn.Module.compile: the hooks run inside the compiled call
    elif compiled:
        run = torch.compile(model, backend="aot_eager")
    for step in range(STEPS):
        tokens, targets = lm_batch(step)
        # after the first step nothing may compile again: a recompile raises
        with torch.compiler.set_stance("fail_on_recompile" if step else "default"):
            for _ in range(2):  # two micro-batches, same shapes: one graph
                loss = loss_fn(run(tokens).flatten(0, 1), targets.flatten())
                (loss / 2).backward()
        opt.step()
        opt.zero_grad()
    if hook is not None:
        hook.close()
    result = {
        "graph_breaks": sum(counters["graph_break"].values()),
        "unique_graphs": counters["stats"]["unique_graphs"],
        "frames": counters["frames"]["total"],
    }
    torch._dynamo.reset()
    return result


@pytest.mark.parametrize("in_place", [False, True], ids=["torch.compile(model)", "model.compile()"])
def test_the_hook_adds_no_graph_break_and_no_graph(tmp_path: Path, in_place: bool):
    without = _train(None, compiled=True, in_place=in_place)
    config = ts.StatisticsConfig(activations=True)
    with_hook = _train(tmp_path, compiled=True, statistics=config, in_place=in_place)
    assert without["graph_breaks"] == 0
    assert without["unique_graphs"] == 1
    assert with_hook == without  # same frames and graphs, no break; a recompile would have raised
    trial = create_trial(str(tmp_path))
    assert trial.steps() == list(range(STEPS))
    # the model's own output is seen outside the compiled region; its blocks' only in eager runs
    assert "TinyLM_output_0" in trial.tensor_names()
    assert not any(n.startswith("blocks.") for n in trial.tensor_names())


def test_compiled_and_eager_training_save_the_same_statistics(tmp_path: Path):
    _train(tmp_path / "eager", compiled=False)
    _train(tmp_path / "compiled", compiled=True)
    eager, compiled = create_trial(str(tmp_path / "eager")), create_trial(str(tmp_path / "compiled"))
    assert compiled.steps() == eager.steps() == list(range(STEPS))
    assert compiled.tensor_names() == eager.tensor_names()
    checked = 0
    for name in eager.tensor_names():
        for step in eager.steps():
            if name.startswith("scalar/") or name.endswith("_output_0"):
                pairs = [(eager.tensor(name).value(step), compiled.tensor(name).value(step))]
            else:
                pairs = [
                    (
                        eager.tensor(name).reduction_value(step, r, abs=a),
                        compiled.tensor(name).reduction_value(step, r, abs=a),
                    )
                    for r, a in ts.StatisticsConfig().reductions
                ]
            for want, got in pairs:
                np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6, err_msg=f"{name} step {step}")
                checked += 1
    assert checked > 500
