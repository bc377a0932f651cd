"""The evaluator's floor plan, read from its imports (``grimp``, as ``import-linter`` reads them).

From the top: the pipeline (``service``, ``arrivals``, ``step_evaluation``, ``completion``,
``lifecycle``, ``schedule``, ``decisions``, ``workers``, ``runner``, ``rule_factory``,
``profiler_files``); then
``registration`` and ``sandbox``, which never import each other; then ``store``; then the values
every layer shares (``models``, ``details``, ``failures``, ``objects``, and ``handler_env``, the
settings the handlers read from the environment and hand to the ``from_env`` constructors).
Imports made only for type checking count: a circle of annotations is still one object split across
files.
"""

from __future__ import annotations

import grimp
import pytest

EVALUATOR = "tornasole.evaluator"
PIPELINE = {
    f"{EVALUATOR}.{name}"
    for name in (
        "service",
        "arrivals",
        "step_evaluation",
        "completion",
        "lifecycle",
        "schedule",
        "decisions",
        "workers",
        "runner",
        "rule_factory",
        "profiler_files",
    )
}
VALUES = {f"{EVALUATOR}.{name}" for name in ("models", "details", "failures", "objects", "handler_env")}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("tornasole", cache_dir=None)


def _package(graph: grimp.ImportGraph, name: str) -> set[str]:
    return {f"{EVALUATOR}.{name}"} | graph.find_descendants(f"{EVALUATOR}.{name}")


def _imports_within(graph: grimp.ImportGraph, modules: set[str]) -> dict[str, set[str]]:
    return {
        m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith(EVALUATOR)} for m in modules
    }


def _offenders(graph: grimp.ImportGraph, lower: set[str], higher: set[str]) -> set[str]:
    return {f"{m} -> {i}" for m, imported in _imports_within(graph, lower).items() for i in imported & higher}


def test_every_evaluator_module_has_a_floor(graph: grimp.ImportGraph) -> None:
    placed = PIPELINE | VALUES | {EVALUATOR}
    for package in ("store", "registration", "sandbox"):
        placed |= _package(graph, package)
    evaluator = {EVALUATOR} | graph.find_descendants(EVALUATOR)
    assert evaluator - placed == set(), "a new module: give it a floor in this test and in the report"
    assert placed - evaluator == set(), "a module named here is gone"


def test_store_imports_neither_registration_sandbox_nor_the_pipeline(graph: grimp.ImportGraph) -> None:
    higher = PIPELINE | _package(graph, "registration") | _package(graph, "sandbox")
    assert _offenders(graph, _package(graph, "store"), higher) == set()


def test_registration_and_sandbox_stand_below_the_pipeline_and_apart(graph: grimp.ImportGraph) -> None:
    registration, sandbox = _package(graph, "registration"), _package(graph, "sandbox")
    assert _offenders(graph, registration, PIPELINE | sandbox) == set()
    assert _offenders(graph, sandbox, PIPELINE | registration) == set()


def test_the_shared_values_import_no_layer_above_them(graph: grimp.ImportGraph) -> None:
    evaluator = {EVALUATOR} | graph.find_descendants(EVALUATOR)
    assert _offenders(graph, VALUES, evaluator - VALUES) == set()


def _circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module, or of one that imports itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_inside_the_evaluator(graph: grimp.ImportGraph) -> None:
    evaluator = {EVALUATOR} | graph.find_descendants(EVALUATOR)
    assert _circles(_imports_within(graph, evaluator)) == []
