"""moto's DynamoDB parses the same few expressions on every request: parse each once.

A speed patch (``tornasole.local.moto_patches``).

The evaluator sends a handful of distinct update and condition expressions,
thousands of times, each with new placeholder values. For every UpdateItem
moto parses the update expression twice (the response class, then the backend),
deep-copies the tree before validating it (the validator substitutes the
placeholders into its copy) and lexes the condition expression twice: together
about a fifth of the local mode's DynamoDB time.

While cached:

- ``UpdateExpressionParser.make`` returns the tree parsed the first time for
  that text. moto never changes that tree: the validator works on a copy and
  the response class only lists its placeholders. The copy the validator takes
  of a cached tree is made from the tree's pickle (a fifth of the time of
  ``copy.deepcopy``; the tree holds only parser nodes and strings, no values);
- ``ConditionExpressionParser`` lexes a condition expression once: the token
  list depends on the text alone (placeholders are looked up in a later stage),
  and its tokens are immutable named tuples, handed out in a new deque;
- the validator's ten tree walkers each asked, at every node, which node types
  they process, and each answer built a new dict of bound methods to read its
  keys (a twentieth of the local mode's CPU). Every walker's answer is a
  constant of its class in the moto checked: it is kept per class.

An expression that fails to parse raises as before and is not kept. The caches
hold at most ``MAX_EXPRESSIONS`` entries each (then start again), keyed by the
exact text.
"""

from __future__ import annotations

import copy
import logging
import pickle
from collections import deque
from typing import Any

__all__ = ["cache", "uncache"]

log = logging.getLogger(__name__)
MAX_EXPRESSIONS = 256

_trees: dict[str, tuple[Any, bytes]] = {}  # update expression text -> (tree, its pickle)
_pickles: dict[int, tuple[Any, bytes]] = {}  # id(tree) -> (tree, its pickle), for the validator's copy
_tokens: dict[str, tuple[Any, ...]] = {}  # condition expression text -> its tokens
_node_types: dict[type, tuple[type, ...]] = {}  # tree walker class -> the node types it processes
_originals: dict[str, Any] = {}


def cache() -> None:
    """Patch moto's parsers (idempotent)."""
    if _originals:
        return
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    if validators.deepcopy is not copy.deepcopy:  # not the module this was written against
        log.debug("moto's validators copy trees differently: expression cache off")
        return
    _originals["make"] = UpdateExpressionParser.__dict__["make"]
    _originals["lex"] = ConditionExpressionParser.__dict__["_lex_condition_expression"]
    _originals["deepcopy"] = validators.deepcopy
    _originals["node_types"] = DepthFirstTraverser.__dict__["nodes_to_be_processed"]
    DepthFirstTraverser.nodes_to_be_processed = _nodes_to_be_processed  # type: ignore[method-assign]
    UpdateExpressionParser.make = classmethod(_make)  # type: ignore[method-assign,assignment]
    ConditionExpressionParser._lex_condition_expression = _lex  # type: ignore[method-assign]
    validators.deepcopy = _copy_tree


def uncache() -> None:
    if not _originals:
        return
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    DepthFirstTraverser.nodes_to_be_processed = _originals.pop("node_types")  # type: ignore[method-assign]
    UpdateExpressionParser.make = _originals.pop("make")  # type: ignore[method-assign]
    ConditionExpressionParser._lex_condition_expression = _originals.pop("lex")  # type: ignore[method-assign]
    validators.deepcopy = _originals.pop("deepcopy")
    _trees.clear()
    _pickles.clear()
    _tokens.clear()
    _node_types.clear()


def _make(cls: Any, expression_str: str) -> Any:
    entry = _trees.get(expression_str)
    if entry is None:
        tree = _originals["make"].__func__(cls, expression_str)
        if len(_trees) >= MAX_EXPRESSIONS:
            _trees.clear()
            _pickles.clear()
        entry = (tree, pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL))
        _trees[expression_str] = entry
        _pickles[id(tree)] = entry
    return entry[0]


def _copy_tree(obj: Any, memo: dict[int, Any] | None = None) -> Any:
    """``deepcopy`` as the validators module calls it; a cached tree is copied from its pickle."""
    entry = _pickles.get(id(obj))
    if entry is not None and entry[0] is obj and memo is None:
        return pickle.loads(entry[1])
    return copy.deepcopy(obj, memo)


def _lex(self: Any) -> deque[Any]:
    text = self.condition_expression
    tokens = _tokens.get(text)
    if tokens is None:
        tokens = tuple(_originals["lex"](self))
        if len(_tokens) >= MAX_EXPRESSIONS:
            _tokens.clear()
        _tokens[text] = tokens
    return deque(tokens)


def _nodes_to_be_processed(self: Any) -> tuple[type, ...]:
    types = _node_types.get(type(self))
    if types is None:
        types = _node_types[type(self)] = tuple(_originals["node_types"](self))
    return types
