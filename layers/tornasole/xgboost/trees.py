"""One boosting round's trees as columns, the shape of ``Booster.trees_to_dataframe`` (without pandas).

Columns (smdebug's ``trees/<column>`` tensors): ``Tree``, ``Node`` (int),
``ID`` (``"<tree>-<node>"``), ``Feature`` (``"Leaf"`` for leaves), ``Split``,
``Yes``, ``No``, ``Missing`` (``"<tree>-<node>"``, ``nan`` for leaves), ``Gain``
(the leaf value for leaves), ``Cover``, ``Category`` (the category list of a
categorical split, else ``"nan"``). Rows are sorted by node id. Unlike smdebug,
which took the single tree whose index equals the round, every tree of the
round is parsed (several per round for multi-class models and forests).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tornasole.exceptions import ConfigurationError

__all__ = ["round_trees"]

_STATS = re.compile("=|,")
_NUMBER = re.compile(r"\b\d+\b")


def round_trees(model: Any, iteration: int) -> dict[str, np.ndarray]:
    """The trees built in boosting round ``iteration`` of ``model`` (an ``xgboost.Booster``)."""
    dump = model.get_dump(with_stats=True)
    rounds = max(model.num_boosted_rounds(), 1)
    per_round = max(len(dump) // rounds, 1)
    first = iteration * per_round
    rows: dict[str, list[Any]] = {
        k: []
        for k in (
            "Tree",
            "Node",
            "ID",
            "Feature",
            "Split",
            "Yes",
            "No",
            "Missing",
            "Gain",
            "Cover",
            "Category",
        )
    }
    for tree_id in range(first, min(first + per_round, len(dump))):
        for line in dump[tree_id].split("\n"):
            if line.strip():
                _parse_line(tree_id, line, rows)
    arrays = {
        "Tree": np.array(rows["Tree"], dtype=np.int64),
        "Node": np.array(rows["Node"], dtype=np.int64),
        "ID": np.array(rows["ID"], dtype=np.str_),
        "Feature": np.array(rows["Feature"], dtype=np.str_),
        "Split": np.array(rows["Split"], dtype=np.float64),
        "Yes": np.array(rows["Yes"], dtype=np.str_),
        "No": np.array(rows["No"], dtype=np.str_),
        "Missing": np.array(rows["Missing"], dtype=np.str_),
        "Gain": np.array(rows["Gain"], dtype=np.float64),
        "Cover": np.array(rows["Cover"], dtype=np.float64),
        "Category": np.array(rows["Category"], dtype=np.str_),
    }
    order = np.lexsort((arrays["Node"], arrays["Tree"]))
    return {k: v[order] for k, v in arrays.items()}


def _parse_line(tree_id: int, line: str, rows: dict[str, list[Any]]) -> None:
    head, sep, rest = line.partition("[")
    node = int(_NUMBER.findall(head)[0])
    rows["Tree"].append(tree_id)
    rows["Node"].append(node)
    rows["ID"].append(f"{tree_id}-{node}")
    if not sep:  # leaf: "3:leaf=0.25,cover=4"
        stats = _STATS.split(head.split(":", 1)[1])
        rows["Feature"].append("Leaf")
        for col in ("Split", "Yes", "No", "Missing"):
            rows[col].append(float("nan") if col == "Split" else "nan")
        rows["Gain"].append(float(stats[1]))
        rows["Cover"].append(float(stats[3]))
        rows["Category"].append("nan")
        return
    cond, _, stats_text = rest.partition("]")
    if "<" in cond:
        feature, _, split = cond.partition("<")
        rows["Split"].append(float(split))
        rows["Category"].append("nan")
    elif ":{" in cond:
        feature, _, cats = cond.partition(":")
        rows["Split"].append(float("nan"))
        rows["Category"].append(cats.strip("{}"))
    else:
        raise ConfigurationError(f"tree {tree_id}: cannot parse the split {cond!r} of its text dump")
    stats = _STATS.split(stats_text.strip())
    rows["Feature"].append(feature)
    rows["Yes"].append(f"{tree_id}-{stats[1]}")
    rows["No"].append(f"{tree_id}-{stats[3]}")
    rows["Missing"].append(f"{tree_id}-{stats[5]}")
    rows["Gain"].append(float(stats[7]))
    rows["Cover"].append(float(stats[9]))
