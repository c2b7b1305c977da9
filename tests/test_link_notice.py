"""The keys a widget's link may set (builder.widgets.link_notice): every setting a widget writes into a link is one
it accepts back, so a link the widget made never shows a notice (issue 14 item 2)."""

from __future__ import annotations

import re

from builder.catalog import default_gpus, default_models
from builder.widgets import calculator, link_notice

MODELS = default_models()
GPUS = [(key, gpu.display, gpu.usable_bytes) for key, gpu in default_gpus().items()]


def accepts(spec: list, value: str) -> bool:
    """What 04-link-notice.js checkLink decides for one value."""
    kind, *allowed = spec
    if kind == "whole":
        return value.lstrip("-").isdigit() and allowed[0] <= int(value) <= allowed[1]
    if kind == "fraction":
        return value == "" or (re.fullmatch(r"\d*\.?\d+", value) is not None
                               and float(allowed[0]) <= float(value) <= float(allowed[1]))
    return kind == "choice" and value in allowed


def test_every_calculator_setting_a_link_can_carry_is_accepted_back():
    keys = calculator.link_keys(GPUS, MODELS)
    defaults = calculator.PLAIN_STATE | {"model": "llama-3-8b", "gpu": GPUS[0][0]}
    for key, value in defaults.items():
        assert key in keys and accepts(keys[key], value), (key, value)
    for model in MODELS.values():  # a custom model's fields, filled from every catalog shape
        for key, value in calculator.arch_state(model).items():
            assert accepts(keys[key], value), (model.name, key, value)
    for start, *_ in calculator.starts(MODELS):
        for key, value in calculator.start_state(start, MODELS, GPUS[0][0]).items():
            assert accepts(keys[key], value), (start, key, value)


def test_the_words_fill_every_placeholder_they_name():
    counts = {"line": 3, "rest": 0, "whole": 2, "fraction": 2, "choice": 1, "unknown": 0, "other_engine": 0}
    assert set(link_notice.WORDS) == set(counts)
    for key, count in counts.items():
        assert sorted(set(re.findall(r"\{(\d)\}", link_notice.WORDS[key]))) == [str(i) for i in range(count)]
