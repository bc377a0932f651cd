"""The PyTorch hook: weights, biases, gradients, module inputs/outputs and losses of a ``nn.Module``.

Names follow FORMAT.md 2.4 so smdebug-era regexes and rules keep matching:
``Net_fc1.weight`` (model class + parameter path), ``gradient/Net_fc1.weight``,
``relu_output_0`` (module path + ``_output_<i>``), ``CrossEntropyLoss_output_0``.
The global step advances on every forward pass of a registered model
(FORMAT.md 5), whatever the mode. ``save_scalar`` / ``save_tensor`` values
belong to the step whose forward pass ran last, so call them after the forward
pass they describe (``loss = ...; hook.save_scalar("loss", loss)``); called
before the first forward pass, or right after ``set_mode``, they join the next
step.

Only one forward pre-hook per registered model is permanent. On a step that
saves something the hook registers, for that step only, forward hooks on the
modules whose inputs/outputs a saved collection wants and gradient hooks on the
parameters whose gradients are wanted, and removes them when the step ends; so
on the other steps PyTorch runs the model as if no hook were there. Gradient
hooks are never registered in EVAL or PREDICT.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from tornasole.core.collection import Collection
from tornasole.exceptions import ConfigurationError
from tornasole.hooks.numpy_hook import Hook as _CoreHook
from tornasole.hooks.stop_signal import TrainingStopRequested
from tornasole.modes import ModeKeys
from tornasole.pytorch.capture import TorchCapture

__all__ = ["Hook"]

logger = logging.getLogger(__name__)


@dataclass
class _Model:
    module: nn.Module
    name: str  # class name, the prefix of parameter names
    submodules: list[tuple[str, nn.Module]]  # (module path, module); the model itself under its class name
    params: list[tuple[str, nn.Parameter]]  # (saved name, parameter)


class Hook(_CoreHook):
    """Save tensors of a PyTorch model; same arguments as :class:`tornasole.Hook`.

    Examples
    --------
    >>> import tempfile, torch
    >>> from torch import nn
    >>> from tornasole.pytorch import Hook, SaveConfig
    >>> model, loss_fn = nn.Sequential(nn.Linear(4, 2)), nn.MSELoss()
    >>> hook = Hook(tempfile.mkdtemp(), save_config=SaveConfig(save_interval=1),
    ...             include_collections=["weights", "gradients"])
    >>> hook.register_module(model); hook.register_loss(loss_fn)
    >>> loss_fn(model(torch.randn(3, 4)), torch.randn(3, 2)).backward()
    >>> hook.close()
    """

    _INIT_STEP = -1
    _OPEN_AT_START = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tc = TorchCapture()
        self._models: list[_Model] = []
        self._losses: list[tuple[str, nn.Module]] = []
        self._permanent: list[Any] = []
        self._step_handles: list[Any] = []
        self._io_counts: dict[str, int] = {}
        self._firing: _Model | None = None
        self._broken = False
        self._modules_seen = -1  # Collection.modules_version last resolved
        self._resolved_modules: set[tuple[int, int]] = set()
        # as smdebug: the newest PyTorch hook is the one ``tornasole.pytorch.get_hook()`` returns
        from tornasole.hooks.singleton import set_hook

        set_hook(self)

    # -- registration -------------------------------------------------------------------------
    def register_module(self, module: nn.Module) -> None:
        """Watch ``module``: each of its forward passes is one step."""
        if not isinstance(module, nn.Module):
            raise ConfigurationError(f"register_module: {type(module).__name__} is not a torch.nn.Module")
        if not self.enabled:
            return
        if any(m.module is module for m in self._models):
            return  # registered already: a second pre-hook would count every step twice
        cls_name = module._get_name()
        subs = [(name or cls_name, m) for name, m in module.named_modules()]
        params = [(f"{cls_name}_{pname}", p) for pname, p in module.named_parameters()]
        model = _Model(module, cls_name, subs, params)
        self._models.append(model)
        self._permanent.append(module.register_forward_pre_hook(_Callback(self._pre_hook_for(model), self)))
        self._modules_seen = -1

    register_hook = register_module  # smdebug's older name

    def register_loss(self, loss_module: nn.Module) -> None:
        """Save the output of ``loss_module`` as ``<LossClass>_output_0`` (collection ``losses``)."""
        if not isinstance(loss_module, nn.Module):
            raise ConfigurationError(f"register_loss: {type(loss_module).__name__} is not a torch.nn.Module")
        if self.enabled:
            self._losses.append((loss_module._get_name(), loss_module))

    def record_tensor_value(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        """Save a functional loss (``F.mse_loss(...)``) as ``<tensor_name>_output_0``."""
        if not self._closed:
            self._write_io(tensor_name, "_output_", tensor_value)

    # -- step callbacks -----------------------------------------------------------------------
    def _pre_hook_for(self, model: _Model) -> Callable[[nn.Module, Any], None]:
        def pre_hook(_module: nn.Module, _inputs: Any) -> None:
            if self._modules_seen != Collection.modules_version:
                self._resolve_module_collections()
            self._firing = model
            self._begin_step()

        return pre_hook

    def _resolve_module_collections(self) -> None:
        """Collections given modules (``add_module_tensors``) get smdebug's ``<path>_output_`` patterns."""
        self._modules_seen = Collection.modules_version
        names = {id(m): mname for model in self._models for mname, m in model.submodules}
        changed = False
        for coll in self.collection_manager:
            for module, (inputs, outputs) in list(coll.modules.items()):
                mname = names.get(id(module))
                key = (id(coll), id(module))
                if mname is None or key in self._resolved_modules:
                    continue
                self._resolved_modules.add(key)
                wanted = (("_input_", inputs), ("_output_", outputs))
                coll.include([mname + suffix for suffix, on in wanted if on])
                changed = True
        if changed:
            self._collections_changed()

    def _wanted(self, name: str) -> bool:
        return self._saves.plan(name, self._current_step_colls(), self.mode) is not None

    def _on_step_begin(self) -> None:
        self._io_counts.clear()
        model = self._firing
        if model is not None:
            for pname, param in model.params:
                self._save_named(pname, param)
            if self.mode not in (ModeKeys.EVAL, ModeKeys.PREDICT) and torch.is_grad_enabled():
                for pname, param in model.params:
                    gname = "gradient/" + pname
                    if param.requires_grad and self._wanted(gname):
                        self._step_handles.append(
                            param.register_hook(_Callback(self._grad_hook(gname), self))
                        )
            for mname, module in model.submodules:
                self._watch_io(mname, module)
        for lname, loss in self._losses:
            self._watch_io(lname, loss)

    def _watch_io(self, mname: str, module: nn.Module) -> None:
        want_in = self._wanted(f"{mname}_input_0")
        want_out = self._wanted(f"{mname}_output_0")
        if not (want_in or want_out):
            return

        def io_hook(_module: nn.Module, inputs: Any, outputs: Any) -> None:
            if want_in:
                self._write_io(mname, "_input_", inputs)
            if want_out:
                self._write_io(mname, "_output_", outputs)

        self._step_handles.append(module.register_forward_hook(_Callback(io_hook, self)))

    def _grad_hook(self, gname: str) -> Callable[[torch.Tensor], None]:
        def grad_hook(grad: torch.Tensor) -> None:
            if grad is not None:
                self._save_named(gname, grad)

        return grad_hook

    def _write_io(self, mname: str, suffix: str, value: Any) -> None:
        key = mname + suffix
        idx = self._io_counts.get(key, 0)
        for t in _tensors_in(value):
            self._save_named(f"{key}{idx}", t)
            idx += 1
        self._io_counts[key] = idx

    def _on_step_end(self) -> None:
        handles, self._step_handles = self._step_handles, []
        for h in handles:
            h.remove()

    def _on_close(self) -> None:
        self._on_step_end()
        for h in self._permanent:
            h.remove()
        self._permanent = []

    # -- torch values -------------------------------------------------------------------------
    def _capture(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self._tc.capture(value)
        return super()._capture(value)

    def _capture_scalar(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ConfigurationError(f"save_scalar: value of shape {tuple(value.shape)} is not a scalar")
            return self._tc.capture(value)
        return super()._capture_scalar(value)

    def _reduce(self, value: Any, reduction: str, abs_: bool) -> Any:
        if isinstance(value, torch.Tensor):
            return self._tc.reduce(value, reduction, abs_)
        return super()._reduce(np.asarray(value), reduction, abs_)

    @staticmethod
    def _shape_of(value: Any) -> tuple[int, ...]:
        return (
            tuple(int(d) for d in np.shape(value))
            if not isinstance(value, torch.Tensor)
            else tuple(value.shape)
        )

    def _materializer(self) -> Any:
        return self._tc.materializer()


class _Callback:
    """A hook callback that never breaks training and pickles (and deep-copies) as a no-op.

    An unexpected error inside the hook is logged once, with its traceback, and
    turns the hook's callbacks off; training goes on (``TrainingStopRequested``,
    which the user asked for, is the one exception that propagates).
    ``torch.save(model)`` pickles the model's hook dictionaries: it must work
    while our hook is attached, and a copy of the model (``copy.deepcopy``, an
    EMA model) must not drive this hook's steps.
    """

    __slots__ = ("fn", "owner")

    def __init__(self, fn: Callable[..., Any], owner: Hook) -> None:
        self.fn = fn
        self.owner = owner

    def __call__(self, *args: Any) -> Any:
        if self.owner._broken:
            return None
        try:
            return self.fn(*args)
        except TrainingStopRequested:
            raise
        except Exception:  # noqa: BLE001 - a hook bug must not end a training run
            self.owner._broken = True
            logger.exception("Tornasole: the PyTorch hook failed and stops saving; training continues")
            return None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_inert, ())


def _noop(*_args: Any) -> None:
    return None


def _inert() -> Callable[..., None]:
    return _noop


def _tensors_in(value: Any) -> list[torch.Tensor]:
    """Tensors of a module's inputs/outputs, depth first through tuples and lists (as smdebug)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        out: list[torch.Tensor] = []
        for v in value:
            out.extend(_tensors_in(v))
        return out
    return []
