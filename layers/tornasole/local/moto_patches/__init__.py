"""Every change the local mode makes to moto's (and botocore's) private code, and the contract for it.

The local mode runs moto's server in its own process with concurrent workers.
Three of moto's defects would make it answer wrongly there (correctness patches);
the rest of its cost per evaluated step is work a real service would not do
(speed patches). Each patch replaces a private attribute, which any moto
release may change: ``versions`` holds the one table of releases each patch was
checked against; on any other release the speed patches stay off (one log
line) and the correctness patches refuse (``UnsupportedMotoError``).
``TORNASOLE_MOTO_SPEED_PATCHES=0`` turns the speed patches off on a checked moto
too. ``patch_set`` applies and undoes them as one. The upstream issue that would
retire each patch is written out in ``docs/MOTO_UPSTREAM.md`` (U1..U9).

=============================  =====================================================  ===========  ========
module                         attribute patched                                      for          upstream
=============================  =====================================================  ===========  ========
dynamodb_request_lock          ``DynamoHandler.call_action``,                         correctness  U1
                               ``DynamoDBStreamsHandler.call_action``: one request at
                               a time (a cancelled transaction restores a deep copy
                               of the table, losing other threads' writes)
sqs_one_receiver               ``SQSBackend.receive_message``: each pass over a       correctness  U2
                               queue under a lock (two receivers got one message)
s3_request_lock                ``S3Response.key_response``,                           correctness  U10
                               ``S3Response.bucket_response``: one request at a time
                               (a PUT whose object another PUT replaced before its
                               reply answered 500, and S3 notified twice)
dynamodb_transaction_rollback  ``DynamoDBBackend.transact_write_items``,              speed        U1
                               ``Table.__deepcopy__``: save only the items a
                               transaction names, not a copy of the table
dynamodb_partition_query       ``Table.query``; a partition's dict becomes a          speed        U3
                               ``SortedPartition``: read one partition, bisect the
                               sort key range (moto sorts the whole table)
dynamodb_expression_cache      ``UpdateExpressionParser.make``,                       speed        U4
                               ``ConditionExpressionParser._lex_condition_expression``,
                               ``validators.deepcopy``,
                               ``DepthFirstTraverser.nodes_to_be_processed``: parse
                               each expression text once
dynamodb_answer_serializer     ``BaseJSONSerializer._serialize_type_structure``,      speed        U5
                               ``BaseJSONSerializer._serialize_type_map``: attribute
                               values already in the wire shape are written as they
                               are
dynamodb_stream_reader         reads ``Table.stream_shard.items`` and                 speed        U6
                               ``starting_sequence_number``, trims them and
                               ``DynamoDBStreamsBackend.shard_iterators``: the stream
                               read in-process, consumed records forgotten
repeated_work_cache            ``jsonpath_ng.ext.parse``,                             speed        U7
                               ``moto.core.responses.method_names_from_class``,
                               ``SQSBackend.is_message_valid_based_on_retention_period``:
                               memoized / read directly
model_registry                 ``BaseModel.__new__`` (``instances_tracked``): model   speed        U8
                               objects no longer kept for the process's life
in_process_transport,          botocore's ``BUILTIN_HANDLERS`` (a ``before-send``     speed        U9
in_process_signing             handler) and ``botocore.auth.AUTH_TYPE_MAPS``; moto's
                               ``DomainDispatcherApplication.app_instances``,
                               ``create_app``, ``url_paths``,
                               ``Request.from_primitives``: this process's requests
                               handed to moto's app without a socket or HMAC
=============================  =====================================================  ===========  ========

Other packages import only what this ``__init__`` exports; ``tornasole.local``
is the only user besides the tests and the reliability suite.
"""

from __future__ import annotations

from tornasole.local.moto_patches import in_process_transport
from tornasole.local.moto_patches.dynamodb_stream_reader import read_stream, release_stream
from tornasole.local.moto_patches.patch_set import adjust_moto, moto_adjusted, restore_moto
from tornasole.local.moto_patches.versions import (
    CHECKED_MOTO,
    CHECKED_SPEED_PATCHES,
    UnsupportedMotoError,
    installed_moto,
    moto_requirement,
    speed_patches_enabled,
)

__all__ = [
    "CHECKED_MOTO",
    "CHECKED_SPEED_PATCHES",
    "UnsupportedMotoError",
    "adjust_moto",
    "in_process_transport",
    "installed_moto",
    "moto_adjusted",
    "moto_requirement",
    "read_stream",
    "release_stream",
    "restore_moto",
    "speed_patches_enabled",
]
