"""``tornasole.safe_regex``: what a writer types runs in bounded time, or is refused (issue #34 N3)."""

from __future__ import annotations

import re
import time

import pytest

from tornasole.format.index import MAX_TENSOR_NAME_LENGTH
from tornasole.safe_regex import MAX_PATTERN_LENGTH, UnsafeRegex, compile_safe, regex_problem

# smdebug's and SageMaker's own patterns, and the shapes users write: all accepted.
ACCEPTED = [
    ".*relu_output",
    "gradients/.*",
    "fc1.*",
    ".*epoch_acc(uracy)?$",
    ".*relu.*",
    ".*conv.*weight.*",
    "^.*a.*b.*$",
    "(train|eval)_loss",
    "^(?!.*bias).*$",
    "[ab]+",
    "a{1,5}b",
    ".*tanh_input.*|.*relu_output.*",  # a top-level alternation: its branches are counted one by one
]
REFUSED = {
    "(a|a)+$": "alternation or lookaround inside a repeat",
    "(a+)+$": "a repeat inside a repeat",
    "(\\w*x)*": "a repeat inside a repeat",
    "(?:(?=a)a)*": "alternation or lookaround inside a repeat",
    "(a*)\\1": "backreferences",
    ".*a.*a.*b": "3 repeats; at most 2",
    ".*relu.*|.*a.*a.*b": "3 repeats; at most 2",  # the worst branch counts
    "x.*|(a+)+": "a repeat inside a repeat",
    "\\w*\\w*\\w*!": "3 repeats; at most 2",
    "(": "not a valid regular expression",
    "a" * (MAX_PATTERN_LENGTH + 1): "characters long",
}


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_usual_patterns_are_accepted(pattern: str) -> None:
    assert regex_problem(pattern) is None
    assert compile_safe(pattern, "include_regex") == re.compile(pattern)


@pytest.mark.parametrize("pattern", sorted(REFUSED))
def test_super_linear_patterns_are_refused_naming_why(pattern: str) -> None:
    problem = regex_problem(pattern)
    assert problem is not None
    assert REFUSED[pattern] in problem
    with pytest.raises(UnsafeRegex, match="tensor_regex"):
        compile_safe(pattern, "tensor_regex")


# The worst accepted shapes against the longest name a reader accepts: what one search may cost.
WORST_ACCEPTED = ["[a-z]*[a-z]*[0-9]$", "\\w*\\w*!", ".*a.*b", "a*a*b", ".*a.*b.*", ".*a.*b|.*c.*d|\\w*\\w*!"]


@pytest.mark.parametrize("pattern", WORST_ACCEPTED)
def test_an_accepted_pattern_costs_under_a_second_on_the_longest_name(pattern: str) -> None:
    assert regex_problem(pattern) is None
    name = "a" * MAX_TENSOR_NAME_LENGTH
    start = time.perf_counter()
    re.search(pattern, name)
    assert time.perf_counter() - start < 1.0  # measured: 0.27 s for the first, milliseconds for the rest
