"""Argument types for numbers with a sign or range: refused by the parser, exit code 2, naming the option.

Why: ``--timeout -5`` used to be accepted and then mean "give up at once" (or wait forever,
depending on the command); argparse reports a bad value as ``argument --timeout: ...`` with the
usage exit code, the same for every command.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["non_negative_float", "non_negative_int", "positive_float", "positive_int"]


def _number(
    convert: Callable[[str], float], what: str, ok: Callable[[float], bool]
) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if (isinstance(value, float) and not math.isfinite(value)) or not ok(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    parse.__name__ = what  # argparse names the type in some messages
    return parse


#: Seconds to wait (``0`` = do not wait).
non_negative_float = _number(float, "a number of seconds >= 0", lambda v: v >= 0)
#: A period or limit that must be more than zero.
positive_float = _number(float, "a number > 0", lambda v: v > 0)
#: A step number or index.
non_negative_int = _number(int, "an integer >= 0", lambda v: v >= 0)
#: A count.
positive_int = _number(int, "an integer > 0", lambda v: v > 0)
