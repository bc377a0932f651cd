"""Read everything a trial exposes through the smdebug-style public API, with either reader.

Why one body for both: our ``Trial``/``Tensor`` API mirrors smdebug's, so the
very same code can run inside ``.venv-smdebug`` (via ``smdebug_runner``) and
in our process; comparing the two dumps is a differential test of the readers
(``test_reader_differential.py``), and the smdebug dump alone checks our writer
(``test_reader_oracle.py``). Errors are recorded per call (``"Type: message"``)
instead of raised, so one disagreement never hides the others.

Inputs (a JSON dict): ``path``; ``workers`` (used for per-mode reads);
``reductions``: ``[[tensor, step, worker, reduction, abs], ...]`` to request with
``reduction_value``; ``shapes``: ``[[tensor, step, worker], ...]`` to request with ``shape``; optional
``reduction_values``: ``[[tensor, step, worker], ...]`` for ``reduction_values`` (all saved ones);
``mode_values`` (default true): also read every value by (mode, mode step) for each worker;
``probe_steps``: ``{mode name: [step, ...]}`` for ``has_passed_step`` and what ``value``
of the first tensor raises there (saved, skipped and future steps).
Result: a JSON-able dict plus arrays keyed ``value|name|step|worker``,
``modevalue|name|MODE|mode_step|worker``, ``red|name|step|worker|reduction|abs``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from smdebug_runner import SmdebugResult, run_smdebug

__all__ = ["DUMP_BODY", "dump_with_ours", "dump_with_smdebug"]

# Needs in scope: create_trial, ModeKeys, INPUT, emit, save_array.
DUMP_BODY = r"""
def attempt(fn):
    try:
        return True, fn()
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}"

t = create_trial(INPUT["path"])
out = {"errors": {}, "steps": t.steps(), "workers": sorted(t.workers()), "num_workers": t.num_workers,
       "modes": sorted(m.name for m in t.modes()), "tensor_names": sorted(t.tensor_names()),
       "steps_by_mode": {}, "mode_of": {}, "mode_step_of": {}, "global_step": {}, "tensor_steps": {},
       "tensor_workers": {}, "names_at_step": {}, "names_in_collection": {}, "shapes": {},
       "collections": {}}
for m in ModeKeys:
    out["steps_by_mode"][m.name] = t.steps(mode=m)
    for ms in t.steps(mode=m):
        out["global_step"][f"{m.name}|{ms}"] = t.global_step(m, ms)
for s in t.steps():
    out["mode_of"][str(s)] = t.mode(s).name
    out["mode_step_of"][str(s)] = t.mode_step(s)
    out["names_at_step"][str(s)] = sorted(t.tensor_names(step=s))
for name in sorted(t.tensor_names()):
    tensor = t.tensor(name)
    out["tensor_steps"][name] = {m.name: tensor.steps(mode=m) for m in ModeKeys}
    for s in tensor.steps():
        ws = sorted(tensor.workers(s))
        out["tensor_workers"][f"{name}|{s}"] = ws
        for w in ws:
            ok, v = attempt(lambda: tensor.value(s, worker=w))
            if ok:
                save_array(f"value|{name}|{s}|{w}", v)
            else:
                out["errors"][f"value|{name}|{s}|{w}"] = v
    for m in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT) if INPUT.get("mode_values", True) else ():
        for ms in tensor.steps(mode=m):
            for w in INPUT["workers"]:
                ok, v = attempt(lambda: tensor.value(ms, mode=m, worker=w))
                if ok:
                    save_array(f"modevalue|{name}|{m.name}|{ms}|{w}", v)
                else:
                    out["errors"][f"modevalue|{name}|{m.name}|{ms}|{w}"] = v
for name, s, w, red, ab in INPUT["reductions"]:
    ok, v = attempt(lambda: t.tensor(name).reduction_value(s, red, worker=w, abs=ab))
    if ok:
        save_array(f"red|{name}|{s}|{w}|{red}|{ab}", v)
    else:
        out["errors"][f"red|{name}|{s}|{w}|{red}|{ab}"] = v
for name, s, w in INPUT.get("reduction_values", []):
    ok, v = attempt(lambda: t.tensor(name).reduction_values(s, worker=w))
    if ok:
        for (red, ab), arr in v.items():
            save_array(f"redvals|{name}|{s}|{w}|{red}|{ab}", arr)
    else:
        out["errors"][f"redvals|{name}|{s}|{w}"] = v
for name, s, w in INPUT["shapes"]:
    ok, v = attempt(lambda: [int(d) for d in t.tensor(name).shape(s, worker=w)])
    out["shapes" if ok else "errors"][f"shape|{name}|{s}|{w}"] = v
out["passed"], out["probe_value"] = {}, {}
probe_name = sorted(t.tensor_names())[0]
for mode_name, steps in INPUT.get("probe_steps", {}).items():
    m = ModeKeys[mode_name]
    for s in steps:
        ok, v = attempt(lambda: t.has_passed_step(s, mode=m).name)
        out["passed"][f"{mode_name}|{s}"] = v if ok else "raised " + v.split(":", 1)[0]
        ok, v = attempt(lambda: t.tensor(probe_name).value(s, mode=m))
        out["probe_value"][f"{mode_name}|{s}"] = "value" if ok else "raised " + v.split(":", 1)[0]
for cname, c in t.collections().items():
    out["collections"][cname] = c.to_json_dict()
    out["names_in_collection"][cname] = sorted(t.tensor_names(collection=cname))
emit(out)
"""

_SMDEBUG_IMPORTS = """
from smdebug.trials import create_trial
from smdebug.core.modes import ModeKeys
"""


def dump_with_smdebug(inputs: dict[str, Any], s3_endpoint: str | None = None) -> SmdebugResult:
    """The dump, computed by smdebug 1.0.34 in its venv."""
    return run_smdebug(_SMDEBUG_IMPORTS + DUMP_BODY, inputs=inputs, s3_endpoint=s3_endpoint, timeout=600)


def dump_with_ours(inputs: dict[str, Any]) -> SmdebugResult:
    """The same dump computed by ``tornasole.trials`` in this process (arrays copied, as via npz)."""
    from tornasole.modes import ModeKeys
    from tornasole.trials import create_trial

    res = SmdebugResult()

    def emit(obj: Any) -> None:
        res.data = obj

    def save_array(key: str, value: Any) -> None:
        arr = np.array(value, copy=True)
        res.arrays[str(key)] = arr.astype(str) if arr.dtype.kind == "O" else arr

    scope = {
        "create_trial": create_trial,
        "ModeKeys": ModeKeys,
        "INPUT": inputs,
        "emit": emit,
        "save_array": save_array,
    }
    exec(compile(DUMP_BODY, "<trial_dump>", "exec"), scope)  # noqa: S102 - our own fixed code
    return res
