"""The built-in collections of the Keras/TF hook and the name regexes that fill them.

Names are those of :mod:`tornasole.keras.hook`: ``weights/<variable path>``,
``gradients/<variable path>Grad``, ``optimizer_variables/<variable path>``,
``loss``, metric names, ``<layer>/inputs`` and ``<layer>/outputs``, ``predictions`` and ``labels``
(smdebug's ``outputs``: the model's outputs and targets, :mod:`tornasole.keras.loss_tap`), ``inputs``
(smdebug's name for the model's input, :mod:`tornasole.keras.input_tap`).
"""

from __future__ import annotations

from tornasole.core.collection import Collection, CollectionKeys
from tornasole.core.collection_manager import CollectionManager

__all__ = ["KERAS_REGEXES", "keras_collections"]

#: A BatchNormalization's ``beta`` is its bias (PyTorch names it ``bias``): in ``biases``, not ``weights``,
#: so a rule on the weights does not judge an offset that starts at 0 relative to its own norm.
KERAS_REGEXES = {
    CollectionKeys.WEIGHTS: r"^weights/(?!.*(bias|beta)$)",
    CollectionKeys.BIASES: r"^weights/.*(bias|beta)$",
    CollectionKeys.GRADIENTS: r"^gradients/",
    CollectionKeys.LOSSES: r"(^|_)loss$",
    CollectionKeys.OPTIMIZER_VARIABLES: r"^optimizer_variables/",
    CollectionKeys.INPUTS: r"/inputs$|^inputs(_\d+)?$",
    CollectionKeys.OUTPUTS: r"/outputs$|^(predictions|labels)(_\d+)?$",
    CollectionKeys.SCALARS: r"^scalar/",
}


def keras_collections() -> CollectionManager:
    """The built-in collections of the Keras/TF hook, with the name regexes of the module docstring."""
    cm = CollectionManager()
    for name in (CollectionKeys.ALL, CollectionKeys.DEFAULT, *KERAS_REGEXES, CollectionKeys.METRICS):
        if name in KERAS_REGEXES:
            # replaces what CollectionManager.get gives outputs/inputs: PyTorch's _output_/_input_ regex
            cm.add(Collection(name, include_regex=KERAS_REGEXES[name]))
        else:
            cm.get(name)
    return cm
