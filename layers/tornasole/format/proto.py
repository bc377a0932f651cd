"""The TensorFlow ``Event`` protobuf messages, built in code.

smdebug ships generated ``*_pb2`` files pinned to protobuf 3.20 (pure Python,
slow). We describe the few messages we need with a ``FileDescriptorProto`` built
here and let the installed ``protobuf`` (upb, C) make the classes: no ``protoc``
step, no generated files that drift from the runtime. Field numbers are
TensorFlow's (FORMAT.md 2.2), so the wire format is the one every TF / smdebug
reader understands; the proto package name (``tornasole``) never reaches the wire.

Deviations from TF's ``.proto`` that do not change the wire format:
``TensorProto.dtype`` is an ``int32`` (TF: the ``DataType`` enum; both are
varints) so unknown enum values survive parsing and can be reported by number;
``SummaryMetadata.plugin_data`` is repeated (smdebug writes two entries; a TF
singular field would keep the last). Unused TF fields (images, audio,
graphs ...) are left out; protobuf keeps them as unknown fields when parsing.

The classes are built once, on first use (never at import).
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["messages"]

_F = descriptor_pb2.FieldDescriptorProto
_OPT, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_PKG = "tornasole"

# message name -> [(field name, number, type, label, message type name or None, oneof index or None)]
_MESSAGES = {
    "Event": [
        ("wall_time", 1, _F.TYPE_DOUBLE, _OPT, None, None),
        ("step", 2, _F.TYPE_INT64, _OPT, None, None),
        ("file_version", 3, _F.TYPE_STRING, _OPT, None, 0),
        ("graph_def", 4, _F.TYPE_BYTES, _OPT, None, 0),
        ("summary", 5, _F.TYPE_MESSAGE, _OPT, "Summary", 0),
    ],
    "Summary": [("value", 1, _F.TYPE_MESSAGE, _REP, "Summary.Value", None)],
    "Summary.Value": [
        ("tag", 1, _F.TYPE_STRING, _OPT, None, None),
        ("simple_value", 2, _F.TYPE_FLOAT, _OPT, None, 0),
        ("histo", 5, _F.TYPE_MESSAGE, _OPT, "HistogramProto", 0),
        ("tensor", 8, _F.TYPE_MESSAGE, _OPT, "TensorProto", 0),
        ("metadata", 9, _F.TYPE_MESSAGE, _OPT, "SummaryMetadata", None),
    ],
    # TensorBoard histograms (tornasole.tensorboard writes them; bucket lists are packed, as in proto3).
    "HistogramProto": [
        ("min", 1, _F.TYPE_DOUBLE, _OPT, None, None),
        ("max", 2, _F.TYPE_DOUBLE, _OPT, None, None),
        ("num", 3, _F.TYPE_DOUBLE, _OPT, None, None),
        ("sum", 4, _F.TYPE_DOUBLE, _OPT, None, None),
        ("sum_squares", 5, _F.TYPE_DOUBLE, _OPT, None, None),
        ("bucket_limit", 6, _F.TYPE_DOUBLE, _REP, None, None),
        ("bucket", 7, _F.TYPE_DOUBLE, _REP, None, None),
    ],
    "SummaryMetadata": [
        ("plugin_data", 1, _F.TYPE_MESSAGE, _REP, "SummaryMetadata.PluginData", None),
    ],
    "SummaryMetadata.PluginData": [
        ("plugin_name", 1, _F.TYPE_STRING, _OPT, None, None),
        ("content", 2, _F.TYPE_BYTES, _OPT, None, None),
    ],
    "TensorProto": [
        ("dtype", 1, _F.TYPE_INT32, _OPT, None, None),
        ("tensor_shape", 2, _F.TYPE_MESSAGE, _OPT, "TensorShapeProto", None),
        ("version_number", 3, _F.TYPE_INT32, _OPT, None, None),
        ("tensor_content", 4, _F.TYPE_BYTES, _OPT, None, None),
        ("float_val", 5, _F.TYPE_FLOAT, _REP, None, None),
        ("double_val", 6, _F.TYPE_DOUBLE, _REP, None, None),
        ("int_val", 7, _F.TYPE_INT32, _REP, None, None),
        ("string_val", 8, _F.TYPE_BYTES, _REP, None, None),
        ("int64_val", 10, _F.TYPE_INT64, _REP, None, None),
        ("bool_val", 11, _F.TYPE_BOOL, _REP, None, None),
        ("half_val", 13, _F.TYPE_INT32, _REP, None, None),
    ],
    "TensorShapeProto": [
        ("dim", 2, _F.TYPE_MESSAGE, _REP, "TensorShapeProto.Dim", None),
        ("unknown_rank", 3, _F.TYPE_BOOL, _OPT, None, None),
    ],
    "TensorShapeProto.Dim": [
        ("size", 1, _F.TYPE_INT64, _OPT, None, None),
        ("name", 2, _F.TYPE_STRING, _OPT, None, None),
    ],
}
# Messages with a oneof: message name -> oneof name (index 0).
_ONEOFS = {"Event": "what", "Summary.Value": "value"}


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name="tornasole/event.proto", package=_PKG, syntax="proto3")
    protos: dict[str, descriptor_pb2.DescriptorProto] = {}
    for full_name, fields in _MESSAGES.items():
        outer, _, inner = full_name.partition(".")
        msg = protos[outer].nested_type.add(name=inner) if inner else fdp.message_type.add(name=outer)
        protos[full_name] = msg
        if full_name in _ONEOFS:
            msg.oneof_decl.add(name=_ONEOFS[full_name])
        for name, number, ftype, label, type_name, oneof in fields:
            field = msg.field.add(name=name, number=number, type=ftype, label=label)
            if type_name is not None:
                field.type_name = f".{_PKG}.{type_name}"
            if oneof is not None:
                field.oneof_index = oneof
    return fdp


@functools.cache
def messages() -> SimpleNamespace:
    """Return the message classes (built on first call, then cached).

    Returns
    -------
    types.SimpleNamespace
        Attributes ``Event``, ``Summary``, ``SummaryValue``, ``SummaryMetadata``,
        ``PluginData``, ``TensorProto``, ``TensorShapeProto``, ``Dim``, ``HistogramProto``.

    Examples
    --------
    >>> m = messages()
    >>> m.Event(step=5).SerializeToString().hex()
    '1005'
    """
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())

    def cls(name: str):
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PKG}.{name}"))

    return SimpleNamespace(
        Event=cls("Event"),
        Summary=cls("Summary"),
        SummaryValue=cls("Summary.Value"),
        SummaryMetadata=cls("SummaryMetadata"),
        PluginData=cls("SummaryMetadata.PluginData"),
        TensorProto=cls("TensorProto"),
        TensorShapeProto=cls("TensorShapeProto"),
        Dim=cls("TensorShapeProto.Dim"),
        HistogramProto=cls("HistogramProto"),
    )
