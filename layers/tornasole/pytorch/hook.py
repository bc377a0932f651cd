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
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from tornasole.core.collection import Collection, CollectionKeys
from tornasole.exceptions import ConfigurationError
from tornasole.hooks.numpy_hook import Hook as _CoreHook
from tornasole.hooks.stop_signal import TrainingStopRequested
from tornasole.modes import ModeKeys
from tornasole.profiler.format import trace_events
from tornasole.profiler.sampling.steps import now_us
from tornasole.pytorch.capture import TorchCapture
from tornasole.pytorch.statistics import StatisticsConfig, llm_preset
from tornasole.pytorch.step_statistics import StepStatistics, learning_rate_name

__all__ = ["Hook"]

logger = logging.getLogger(__name__)

_NO_OPTIMIZER_MODES = (ModeKeys.EVAL, ModeKeys.PREDICT)


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

    _PRESETS = {"llm": llm_preset}

    def __init__(
        self,
        *args: Any,
        statistics: StatisticsConfig | bool | dict[str, Any] | None = None,
        preset: str | None = None,
        **kwargs: Any,
    ) -> None:
        if preset is not None:
            if preset not in self._PRESETS:
                raise ConfigurationError(f"Hook(preset={preset!r}): expected one of {sorted(self._PRESETS)}")
            if statistics is not None:
                raise ConfigurationError("Hook: give either preset or statistics, not both")
            statistics = self._PRESETS[preset]()
        super().__init__(*args, **kwargs)
        self.statistics = StatisticsConfig.parse(statistics)
        self._stats = StepStatistics(self.statistics) if self.statistics is not None else None
        self._optimizers: list[Any] = []
        self._scaler: Any = None
        self._stats_steps = 0  # optimizer steps (statistics mode's step boundaries) so far
        self._stats_names_filed: set[str] = set()
        self._warned_no_optimizer = False
        self._tc = TorchCapture()
        self._models: list[_Model] = []
        self._losses: list[tuple[str, nn.Module]] = []
        self._permanent: list[Any] = []
        self._step_handles: list[Any] = []
        self._io_counts: dict[str, int] = {}
        self._firing: _Model | None = None
        self._model_inputs: Any = None  # the firing model's forward arguments while its step begins
        self._broken = False
        self._modules_seen = -1  # Collection.modules_version last resolved
        self._resolved_modules: set[tuple[int, int]] = set()
        self._forward_start_us = 0  # the profiler's phases: when the open forward pass began
        self._forward_end_us = 0  # and when the last one ended (the backward pass starts there)
        self._profiled_optimizers: list[Any] = []
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
        cls_name = _model_name(module)
        subs = [(name or cls_name, m) for name, m in module.named_modules()]
        params = [(f"{cls_name}_{pname}", p) for pname, p in module.named_parameters()]
        model = _Model(module, cls_name, subs, params)
        self._models.append(model)
        self._file_other_parameters(params)
        pre_hook = _OutsideGraphCallback(self._pre_hook_for(model), self)
        self._permanent.append(module.register_forward_pre_hook(pre_hook))
        self._modules_seen = -1
        self._profile_model(model)
        if self._stats is not None:
            if self._firing is None:
                self._firing = model  # the model whose full tensors an optimizer-driven step saves
            if self.statistics.activations:
                for mname, sub in subs:
                    # the model's own output is seen after its (compiled) forward; its parts' in eager only
                    kind = _OutsideGraphCallback if sub is module else _EagerCallback
                    self._permanent.append(
                        sub.register_forward_hook(kind(self._activation_hook(mname), self))
                    )

    register_hook = register_module  # smdebug's older name

    def _file_other_parameters(self, params: list[tuple[str, nn.Parameter]]) -> None:
        """A parameter whose name says neither weight nor bias joins the ``weights`` collection.

        Why: smdebug's patterns (``^(?!gradient).*weight``, ``...bias``) miss a learned position embedding
        (``pos``), a ``cls_token`` or a LayerScale ``gamma``; their gradients are saved (``^gradient``) but
        their values never are, so no rule could see such a parameter stop changing when it never reaches
        the optimiser (the families benchmark's transformer: ``TinyTransformer_pos``). Names that a
        weights or biases pattern matches are left as smdebug files them.
        """
        weights = self.collection_manager.get(CollectionKeys.WEIGHTS)
        biases = self.collection_manager.get(CollectionKeys.BIASES)
        filed = False
        for pname, _param in params:
            if not (weights.matches_regex(pname) or biases.matches_regex(pname)):
                weights.add_tensor_name(pname)
                filed = True
        if filed:
            self._collections_changed()

    def register_loss(self, loss_module: nn.Module) -> None:
        """Save the output of ``loss_module`` as ``<LossClass>_output_0`` (collection ``losses``)."""
        if not isinstance(loss_module, nn.Module):
            raise ConfigurationError(f"register_loss: {type(loss_module).__name__} is not a torch.nn.Module")
        if not self.enabled:
            return
        lname = loss_module._get_name()
        self._losses.append((lname, loss_module))
        if self._stats is not None and self.statistics.loss:

            def loss_hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
                if self.mode in _NO_OPTIMIZER_MODES:
                    return  # an evaluation loss is no part of the training step's
                for i, t in enumerate(_tensors_in(output)):
                    if t.numel() == 1:
                        self._stats.observe_loss(f"{lname}_output_{i}", t)

            self._permanent.append(loss_module.register_forward_hook(_EagerCallback(loss_hook, self)))

    def register_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Statistics mode: one step per ``optimizer.step()`` (not per forward pass), its learning rates.

        The first registered optimizer's steps are the step boundaries: gradients
        are reduced just before it steps (accumulated over the step's micro-batches,
        unscaled by a ``GradScaler``), weights as that step's forward passes used them.
        """
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ConfigurationError(
                f"register_optimizer: {type(optimizer).__name__} is not a torch.optim.Optimizer"
            )
        profiling = self.profiler_config is not None and self.profiler_config.framework_metrics
        if self._stats is None and not profiling:
            raise ConfigurationError(
                "register_optimizer: the hook is not in statistics mode (statistics=...) and not profiling"
            )
        if not self.enabled:
            return
        if profiling and not any(o is optimizer for o in self._profiled_optimizers):
            self._profile_optimizer(optimizer)
        if self._stats is None or any(o is optimizer for o in self._optimizers):
            return
        first = not self._optimizers
        self._optimizers.append(optimizer)
        if first:
            self._permanent.append(
                optimizer.register_step_pre_hook(_Callback(self._before_optimizer_step, self))
            )
            self._permanent.append(
                optimizer.register_step_post_hook(_Callback(self._after_optimizer_step, self))
            )

    def register_grad_scaler(self, scaler: torch.amp.GradScaler) -> None:
        """Statistics mode: save the scaler's scale and the steps it skipped (inf/NaN gradients) each step.

        ``GradScaler`` offers no callback, and a step it skips never calls
        ``optimizer.step()``, so the hook wraps this scaler's ``update`` (the call
        that ends every AMP step): a skipped step is still a step, with its
        non-finite gradients reduced.
        """
        if not isinstance(scaler, torch.amp.GradScaler):
            raise ConfigurationError(f"register_grad_scaler: {type(scaler).__name__} is not a GradScaler")
        if self._stats is None:
            raise ConfigurationError(
                "register_grad_scaler: the hook is not in statistics mode (statistics=...)"
            )
        if not self.enabled or self._scaler is scaler:
            return
        if self._scaler is not None:
            raise ConfigurationError("register_grad_scaler: a GradScaler is registered already")
        self._scaler = scaler
        update = scaler.update
        before = _Callback(self._before_scaler_update, self)
        boundary = _Callback(self._stats_boundary, self)

        def update_and_end_step(new_scale: Any = None) -> None:
            before(scaler)
            update(new_scale)
            boundary()

        scaler.update = update_and_end_step  # type: ignore[method-assign]
        self._scaler_update = update

    def record_tensor_value(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        """Save a functional loss (``F.mse_loss(...)``) as ``<tensor_name>_output_0``.

        In statistics mode a 1-element value is the step's loss (mean over micro-batches), saved every step.
        """
        if self._closed:
            return
        if (
            self._stats is not None
            and self.statistics.loss
            and isinstance(tensor_value, torch.Tensor)
            and tensor_value.numel() == 1
        ):
            if self.mode not in _NO_OPTIMIZER_MODES:  # an evaluation loss is no part of the training step's
                self._stats.observe_loss(f"{tensor_name}_output_0", tensor_value)
            return
        self._write_io(tensor_name, "_output_", tensor_value)

    # -- step callbacks -----------------------------------------------------------------------
    def _pre_hook_for(self, model: _Model) -> Callable[[nn.Module, Any], None]:
        def pre_hook(_module: nn.Module, _inputs: Any) -> None:
            if self._modules_seen != Collection.modules_version:
                self._resolve_module_collections()
            if self._stats is not None:
                if self._optimizers and self._open and self.mode not in _NO_OPTIMIZER_MODES:
                    if self._step_timer is not None:
                        self._forward_start_us = now_us()
                    return  # a micro-batch of the open step: the optimizer ends it
                if self._open and not self._optimizers:  # no optimizer: each forward pass is a step
                    self._stats_finish_step()
                    self._stats_steps += 1
            self._firing = model
            self._model_inputs = _inputs
            try:
                self._begin_step()
            finally:
                self._model_inputs = None
            if self._step_timer is not None:  # after _begin_step: the forward pass is inside the step
                self._forward_start_us = now_us()

        return pre_hook

    # -- the profiler's phases ------------------------------------------------------------------
    def _profile_model(self, model: _Model) -> None:
        """Forward: the model's pre-hook to its forward hook; backward: from there to the gradient of
        its first parameter (the last the backward pass reaches); data loading: each ``next()`` of a
        DataLoader. All run outside any compiled graph (docstrings of the callbacks)."""
        config = self.profiler_config
        if config is None or not config.framework_metrics:
            return
        forward_end = _OutsideGraphCallback(self._profile_forward_end(model.name), self)
        self._permanent.append(model.module.register_forward_hook(forward_end))
        first = next((p for _, p in model.params if p.requires_grad), None)
        if first is not None:
            backward_end = _Callback(self._profile_backward_end(model.name), self)
            self._permanent.append(first.register_post_accumulate_grad_hook(backward_end))
        if config.dataloader:
            from tornasole.pytorch.profiling import listen_to_dataloaders

            listen_to_dataloaders(self)

    def _profile_forward_end(self, name: str) -> Callable[..., None]:
        def forward_end(*_args: Any) -> None:
            start, self._forward_start_us = self._forward_start_us, 0
            if start:
                self._forward_end_us = self._profile_phase(trace_events.FORWARD, name, start)

        return forward_end

    def _profile_backward_end(self, name: str) -> Callable[..., None]:
        def backward_end(_param: Any) -> None:
            start, self._forward_end_us = self._forward_end_us, 0
            if start:
                self._profile_phase(trace_events.BACKWARD, name, start)

        return backward_end

    def _profile_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        self._profiled_optimizers.append(optimizer)
        name = f"{type(optimizer).__name__}.step"
        started = [0]

        def before(*_args: Any) -> None:
            started[0] = now_us()

        def after(*_args: Any) -> None:
            if started[0]:
                self._profile_phase(trace_events.OPTIMIZER, name, started[0])
                started[0] = 0

        self._permanent.append(optimizer.register_step_pre_hook(_Callback(before, self)))
        self._permanent.append(optimizer.register_step_post_hook(_Callback(after, self)))

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
        return self._plan_for(name) is not None

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
                self._watch_io(mname, module, inputs=module is not model.module)
            if self._model_inputs is not None and self._wanted(f"{model.name}_input_0"):
                # the model's own input, as the forward pass reaches it: first in the step's saved order,
                # not after every module it runs (a rule reading that order, SaturatedActivation's output
                # layer, finds the layer that feeds the loss last before the loss)
                self._write_io(model.name, "_input_", self._model_inputs)
        if self._stats is None or not self.statistics.loss:  # statistics mode saves the loss every step
            for lname, loss in self._losses:
                self._watch_io(lname, loss)

    def _watch_io(self, mname: str, module: nn.Module, inputs: bool = True) -> None:
        want_in = inputs and self._wanted(f"{mname}_input_0")
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

    # -- statistics mode ----------------------------------------------------------------------
    def _activation_hook(self, mname: str) -> Callable[[nn.Module, Any, Any], None]:
        def activation_hook(_module: nn.Module, _inputs: Any, outputs: Any) -> None:
            if self.mode in (ModeKeys.TRAIN, ModeKeys.GLOBAL) and self._stats_due():
                for i, t in enumerate(_tensors_in(outputs)):
                    self._stats.observe_activation(f"{mname}_output_{i}", t)

        return activation_hook

    def _stats_due(self) -> bool:
        return self._stats_steps % self.statistics.save_interval == 0

    def _all_params(self) -> list[tuple[str, nn.Parameter]]:
        return [named for model in self._models for named in model.params]

    def _before_optimizer_step(self, *_args: Any) -> None:
        if self._stats_due():
            self._stats.collect(self._all_params())

    def _after_optimizer_step(self, *_args: Any) -> None:
        if self._scaler is None:
            self._stats_boundary()

    def _before_scaler_update(self, scaler: Any) -> None:
        if self._stats_due():
            if not self._stats.collected:  # the scaler skipped optimizer.step(): reduce its gradients here
                self._stats.collect(self._all_params())
            self._stats.observe_scaler(scaler)

    def _stats_boundary(self) -> None:
        """An optimizer step ended: write its statistics, end the step (the next forward pass opens one)."""
        if self._closed:
            return
        self._stats_finish_step()
        self._stats_steps += 1
        self._end_step()
        self._open = False

    def _stats_finish_step(self) -> None:
        """Put the open step's statistics (one device tensor, copied once) into its records."""
        stats = self._stats
        if not self._open:
            self._begin_step()  # a compiled model's forward pre-hook does not run: the optimizer opens steps
        if not self._stats_due():
            stats.reset()
            return
        if not stats.collected:
            if self.statistics.gradients and not self._optimizers and not self._warned_no_optimizer:
                self._warned_no_optimizer = True
                logger.warning(
                    "Tornasole: statistics mode saves gradient statistics only with hook.register_optimizer()"
                )
            stats.collect(self._all_params())
        rates, wide_rates = self._learning_rates() if self.statistics.learning_rate else ([], [])
        flat, tags, kinds = stats.assemble(rates)
        if not self._writes:
            return
        now = time.time()
        pending = self._pending
        if flat is not None:
            # one record of the whole step: the writer encodes its tags from a layout made once
            pending.append(("b", tags, self._tc.capture(flat), now))
        for tag, value in wide_rates:
            pending.append(("t", tag, value, now))
            kinds["scalars"].append(tag)
        self._file_statistics(kinds)

    def _learning_rates(self) -> tuple[list[tuple[str, Any]], list[tuple[str, torch.Tensor]]]:
        """Each param group's learning rate: float32 ones (a float under the default float32 dtype, a
        tensor) join the step's block; a float under another default dtype keeps its own record of that
        dtype (``torch.tensor(lr)``)."""
        rates: list[tuple[str, Any]] = []
        wide: list[tuple[str, torch.Tensor]] = []
        narrow = torch.get_default_dtype() == torch.float32
        for k, opt in enumerate(self._optimizers):
            for g, group in enumerate(opt.param_groups):
                lr = group.get("lr")
                if lr is None:
                    continue
                if torch.is_tensor(lr):
                    rates.append((learning_rate_name(k, g), lr.detach().reshape(())))
                elif narrow:
                    rates.append((learning_rate_name(k, g), float(lr)))
                else:
                    wide.append((learning_rate_name(k, g), torch.tensor(float(lr))))
        return rates, wide

    def _file_statistics(self, kinds: dict[str, list[str]]) -> None:
        """List new statistics names in their collections (the collections file names them)."""
        fixed = {"losses": CollectionKeys.LOSSES, "scalars": CollectionKeys.SCALARS}
        changed = False
        for kind, names in kinds.items():
            for name in names:
                if name in self._stats_names_filed:
                    continue
                self._stats_names_filed.add(name)
                if kind in fixed:
                    targets = [self.collection_manager.get(fixed[kind])]
                else:
                    targets = [
                        c
                        for c in self.collection_manager
                        if c.name != CollectionKeys.ALL and c.matches_regex(name)
                    ]
                    if not targets:
                        targets = [self.collection_manager.get(CollectionKeys.DEFAULT)]
                for coll in targets:
                    coll.add_tensor_name(name)
                changed = True
        if changed:
            self._collections_changed()

    def close(self) -> None:
        """End the current step (in statistics mode without an optimizer, with its statistics) and close."""
        if self._stats is not None and self._open and not self._closed and not self._optimizers:
            _Callback(self._stats_finish_step, self)()
        super().close()

    def _on_close(self) -> None:
        if self._scaler is not None:
            self._scaler.update = self._scaler_update  # type: ignore[method-assign]
            self._scaler = None
        self._on_step_end()
        for h in self._permanent:
            h.remove()
        self._permanent = []
        if self.profiler_config is not None:
            from tornasole.pytorch.profiling import stop_listening

            stop_listening(self)

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


class _OutsideGraphCallback(_Callback):
    """A :class:`_Callback` that ``torch.compile`` runs as Python, outside any graph.

    The registered model's forward pre-hook opens the steps: in a compiled model
    it runs before the compiled forward (a frame of its own, which dynamo skips),
    so it neither breaks the graph nor adds one, and steps are counted as in eager.
    """

    __slots__ = ()

    @torch._dynamo.disable
    def __call__(self, *args: Any) -> Any:
        return super().__call__(*args)


class _EagerCallback(_Callback):
    """A :class:`_Callback` that does nothing while ``torch.compile`` traces it.

    Statistics mode's hooks on submodules (activations) and losses are traced
    into a compiled region when they sit inside it, where their Python side
    effects would break the graph; there they constant-fold to nothing: a
    compiled region's activations are not seen (an eager run's are).
    """

    __slots__ = ()

    def __call__(self, *args: Any) -> Any:
        if torch.compiler.is_compiling():
            return None
        return super().__call__(*args)


def _noop(*_args: Any) -> None:
    return None


def _inert() -> Callable[..., None]:
    return _noop


def _model_name(module: nn.Module) -> str:
    """The model's class name, the prefix of its parameters' names; FSDP2's ``FSDP<Class>`` is ``<Class>``.

    ``fully_shard`` swaps the module's class for a subclass named ``FSDP<Class>``: the
    parameters keep the names they have unsharded (and in a DDP or single-process run).
    """
    name = module._get_name()
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch built without distributed
        return name
    if isinstance(module, FSDPModule) and name.startswith("FSDP"):
        return name[len("FSDP") :]
    return name


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
