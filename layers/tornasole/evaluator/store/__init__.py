"""A job's persistence: the single DynamoDB table, its items and the transactional outbox.

``state_table`` (the table, its design and conditions), ``keys`` (the key layout), ``records``
(stored items <-> typed values), ``item_limits`` (DynamoDB / EventBridge size limits),
``step_store`` (per-step records), ``transitions`` (status changes and their outbox items, one
transaction each), ``outbox`` (writing and publishing outbox items), ``event_entries``
(EventBridge entries within the size limit), ``index_cache`` (index files a warm process keeps).

Imports only the evaluator's values (``models``, ``details``, ``failures``): never the pipeline,
``registration`` or ``sandbox``, which all build on it.
"""
