"""What a widget says about the settings of a link (its URL state) that it could not use.

A widget's state travels in the query string as <widget id>.<key>=<value> (static/widgets/00-core.js readState).
A value the widget cannot take (not a whole number in the key's range, not one of its choices, or a key it does not
have) is left out, the widget keeps the link's other settings, and a notice in the widget says which setting was
left out and why, one sentence each (static/widgets/04-link-notice.js fills these words).
"""

from __future__ import annotations

WORDS = {
    "line": "This link's setting {0}={1} was not used: {2}.",
    "rest": "The figure shows the link's other settings.",
    "whole": "it must be a whole number from {0} to {1}",
    "fraction": "it must be a number from {0} to {1}, or empty for the default",
    "choice": "it must be one of {0}",
    "unknown": "this figure has no such setting",
    "other_engine": "it is a setting of the other engine (give its engine too)",
}


def whole(low: int, high: int) -> list:
    """A key whose value is a whole number from low to high."""
    return ["whole", low, high]


def fraction(low: str, high: str) -> list:
    """A key whose value is a decimal number from low to high (both written as the engine's flags take them), or
    empty for the default."""
    return ["fraction", low, high]


def choice(*values: str) -> list:
    """A key whose value is one of `values`."""
    return ["choice", *values]
