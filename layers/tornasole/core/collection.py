"""Collections: named groups of tensors with their own save and reduction settings.

A tensor belongs to a collection when its name is one of the collection's
``tensor_names`` or matches (``re.search``, anywhere in the name) one of its
``include_regex`` patterns; smdebug-era patterns such as
``^(?!gradient).*weight`` therefore keep selecting the same tensors. The JSON
shape is one entry of a collections file (FORMAT.md 4), with the keys in the
order smdebug writes them so files round-trip byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tornasole.core.reduction_config import ReductionConfig
from tornasole.core.save_config import SaveConfig, SaveConfigMode
from tornasole.exceptions import ConfigurationError

__all__ = [
    "Collection",
    "CollectionKeys",
    "DEFAULT_PYTORCH_COLLECTIONS",
    "PYTORCH_DEFAULT_REGEXES",
    "SCALAR_COLLECTIONS",
    "NON_HISTOGRAM_COLLECTIONS",
]


class CollectionKeys:
    """Names of the built-in collections (smdebug's spellings)."""

    ALL = "all"
    DEFAULT = "default"
    WEIGHTS = "weights"
    BIASES = "biases"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    SCALARS = "scalars"
    OUTPUTS = "outputs"
    INPUTS = "inputs"
    LAYERS = "layers"
    METRICS = "metrics"
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"
    TENSORFLOW_SUMMARIES = "tensorflow_summaries"
    HYPERPARAMETERS = "hyperparameters"
    PREDICTIONS = "predictions"
    LABELS = "labels"
    FEATURE_IMPORTANCE = "feature_importance"
    AVERAGE_SHAP = "average_shap"
    FULL_SHAP = "full_shap"
    TREES = "trees"


# Present in every PyTorch collections file, even when empty (FORMAT.md 4), in this order.
DEFAULT_PYTORCH_COLLECTIONS = (
    CollectionKeys.ALL,
    CollectionKeys.DEFAULT,
    CollectionKeys.WEIGHTS,
    CollectionKeys.BIASES,
    CollectionKeys.GRADIENTS,
    CollectionKeys.LOSSES,
)
PYTORCH_DEFAULT_REGEXES = {
    CollectionKeys.WEIGHTS: "^(?!gradient).*weight",
    CollectionKeys.BIASES: "^(?!gradient).*bias",
    CollectionKeys.GRADIENTS: "^gradient",
    CollectionKeys.LOSSES: "[Ll]oss_(?!input).*output",
    CollectionKeys.OUTPUTS: "_output_",
    CollectionKeys.INPUTS: "_input_",
    CollectionKeys.SCALARS: "^scalar/",
}
# Saved raw, without reductions or histograms, whatever the hook's reduction config says.
SCALAR_COLLECTIONS = frozenset(
    {
        CollectionKeys.LOSSES,
        CollectionKeys.METRICS,
        CollectionKeys.SM_METRICS,
        CollectionKeys.SCALARS,
        CollectionKeys.FEATURE_IMPORTANCE,
        CollectionKeys.AVERAGE_SHAP,
    }
)
# No TensorBoard histograms for these (smdebug's set): scalars, and TF summaries that are already summaries.
NON_HISTOGRAM_COLLECTIONS = SCALAR_COLLECTIONS | {CollectionKeys.TENSORFLOW_SUMMARIES}


def _regex_list(value: str | Iterable[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    out = []
    for v in value:
        if not isinstance(v, str):
            raise ConfigurationError(f"include_regex must be strings, got {v!r}")
        out.append(v)
    return out


class Collection:
    """A named group of tensors.

    Parameters
    ----------
    name : str
    include_regex : str or list of str, optional
        Tensors whose names match any pattern (``re.search``) belong here.
    tensor_names : iterable of str, optional
        Tensors that belong here by exact name.
    reduction_config : ReductionConfig, optional
        ``None`` means the hook's default (full tensor).
    save_config : SaveConfig, SaveConfigMode or dict of modes, optional
        ``None`` means the hook's default.
    save_histogram : bool
        Kept for the file format (TensorBoard histograms).

    Examples
    --------
    >>> c = Collection("relu", include_regex="relu_output_")
    >>> c.matches("relu_output_0"), c.matches("fc1_output_0")
    (True, False)
    >>> c.add_tensor_name("custom"); c.matches("custom")
    True
    >>> Collection.from_json_dict(c.to_json_dict()) == c
    True
    >>> Collection.from_json(c.to_json()) == c
    True
    """

    def __init__(
        self,
        name: str,
        include_regex: str | Iterable[str] | None = None,
        tensor_names: Iterable[str] | None = None,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | SaveConfigMode | Mapping[Any, Any] | None = None,
        save_histogram: bool = True,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"collection name must be a non-empty string, got {name!r}")
        self.name = name
        self.include_regex: list[str] = []
        self._compiled: list[re.Pattern[str]] = []
        self.include(_regex_list(include_regex))
        self.tensor_names: set[str] = set(tensor_names or ())
        self.reduction_config = reduction_config
        self.save_config = save_config
        self.save_histogram = bool(save_histogram)
        # PyTorch modules whose inputs/outputs belong here: module -> (inputs, outputs); not serialized.
        self.modules: dict[Any, tuple[bool, bool]] = {}

    # -- settings -----------------------------------------------------------------------------
    @property
    def reduction_config(self) -> ReductionConfig | None:
        return self._reduction_config

    @reduction_config.setter
    def reduction_config(self, value: ReductionConfig | Mapping[str, Any] | None) -> None:
        if value is not None and not isinstance(value, ReductionConfig):
            if isinstance(value, Mapping):
                value = ReductionConfig.from_json_dict(value)
            else:
                raise ConfigurationError(
                    f"collection {self.name!r}: reduction_config={value!r} is not a ReductionConfig"
                )
        self._reduction_config = value

    @property
    def save_config(self) -> SaveConfig | None:
        return self._save_config

    @save_config.setter
    def save_config(self, value: SaveConfig | SaveConfigMode | Mapping[Any, Any] | None) -> None:
        self._save_config = None if value is None else SaveConfig.parse(value)

    # -- membership ---------------------------------------------------------------------------
    def include(self, regex: str | Iterable[str]) -> None:
        """Add one pattern or a list of patterns; an invalid pattern raises, naming it."""
        for r in _regex_list(regex):
            try:
                self._compiled.append(re.compile(r))
            except re.error as exc:
                raise ConfigurationError(
                    f"collection {self.name!r}: invalid include_regex {r!r}: {exc}"
                ) from exc
            self.include_regex.append(r)

    def add_tensor_name(self, name: str) -> None:
        """Make the tensor called ``name`` part of this collection."""
        self.tensor_names.add(str(name))

    def add_tensor(self, tensor: Any) -> None:
        """Add a tensor by name: a string, or any object with a ``name`` attribute (TF-style tensors)."""
        self.add_tensor_name(tensor if isinstance(tensor, str) else tensor.name)

    def has_tensor_name(self, name: str) -> bool:
        return name in self.tensor_names

    def remove_tensor_name(self, name: str) -> None:
        self.tensor_names.discard(name)

    #: Bumped by every add_module_tensors call, so hooks re-resolve module names only when it moved.
    modules_version = 0

    def add_module_tensors(self, module: Any, inputs: bool = False, outputs: bool = True) -> None:
        """PyTorch: the module's inputs and/or outputs belong here.

        The hook turns the module into ``<module path>_input_`` / ``_output_``
        patterns (smdebug's) once the module is part of a registered model.
        """
        self.modules[module] = (bool(inputs), bool(outputs))
        Collection.modules_version += 1

    def matches(self, name: str) -> bool:
        """Whether the tensor called ``name`` belongs here (exact name, or a regex found in it)."""
        return name in self.tensor_names or self.matches_regex(name)

    def matches_regex(self, name: str) -> bool:
        """Whether any ``include_regex`` pattern is found in ``name``."""
        return any(p.search(name) for p in self._compiled)

    # -- JSON ---------------------------------------------------------------------------------
    def to_json_dict(self) -> dict[str, Any]:
        """One entry of a collections file; ``tensor_names`` sorted for determinism."""
        return {
            "name": self.name,
            "include_regex": list(self.include_regex),
            "tensor_names": sorted(self.tensor_names),
            "reduction_config": self.reduction_config.to_json_dict() if self.reduction_config else None,
            "save_config": self.save_config.to_json_dict() if self.save_config else None,
            "save_histogram": self.save_histogram,
        }

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> Collection:
        """Inverse of :meth:`to_json_dict`."""
        if not isinstance(d, Mapping) or "name" not in d:
            raise ConfigurationError(f"a collection must be an object with a 'name', got {d!r}")
        return cls(
            d["name"],
            include_regex=d.get("include_regex") or [],
            tensor_names=d.get("tensor_names") or [],
            reduction_config=ReductionConfig.from_json_dict(d.get("reduction_config")),
            save_config=SaveConfig.from_json_dict(d.get("save_config")),
            save_histogram=d.get("save_histogram", True),
        )

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> Collection:
        """smdebug's spelling of :meth:`from_json_dict`."""
        return cls.from_json_dict(params)

    def to_json(self) -> str:
        """:meth:`to_json_dict` as a JSON string (what smdebug's ``Collection.to_json`` returns)."""
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_json(cls, json_str: str) -> Collection:
        """Inverse of :meth:`to_json`; also reads smdebug's strings."""
        try:
            d = json.loads(json_str)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"Collection.from_json: not valid JSON: {exc}") from exc
        return cls.from_json_dict(d)

    def __str__(self) -> str:
        return str(self.to_json_dict())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Collection):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict()

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return (
            f"Collection(name={self.name!r}, include_regex={self.include_regex}, "
            f"tensor_names={sorted(self.tensor_names)})"
        )
