"""A widget's data block: a large value an earlier widget on the same page already sent goes as a reference
(builder/render.py widget_json; static/widgets/99-boot.js resolves it), and the teaching widgets' full model
goes as numbers only (builder/model/partrules.RuleSet.encode words=False). The browser tests of both teaching
widgets check that the script still shows Python's numbers from it (tests/browser/test_widget_*.py)."""

from __future__ import annotations

import json

from builder.model.states import MODEL_STATES
from builder.render import SAME_AS, SHARED_MIN_CHARS, PageContext, widget_json
from builder.widgets.model_data import model_data


def context() -> PageContext:
    return PageContext(page=None, charts={}, references={}, catalogs={}, templates=None)


def test_a_large_value_is_sent_once_per_page_and_small_or_different_ones_again():
    page, big = context(), list(range(SHARED_MIN_CHARS))
    first = json.loads(widget_json(page, "bytes", {"full": big, "t": "fits"}))
    second = json.loads(widget_json(page, "budget", {"full": big, "t": "fits", "other": big[1:]}))
    assert first == {"full": big, "t": "fits"}
    assert second == {"full": {SAME_AS: "bytes"}, "t": "fits", "other": big[1:]}
    assert json.loads(widget_json(context(), "budget", {"full": big})) == {"full": big}  # another page: sent again


def test_numbers_only_rules_keep_every_condition_and_amount_and_drop_the_words():
    full, bare = MODEL_STATES.encode(), MODEL_STATES.encode(words=False)
    assert [p[:3] + p[6:] for p in bare["parts"]] == [p[:3] + p[6:] for p in full["parts"]]
    assert {json.dumps(p[3:6]) for p in bare["parts"]} == {json.dumps([["str", ""]] * 3)}
    assert all(p[5] != ["str", ""] for p in full["parts"])  # every part names its source
    assert bare["reads"] == full["reads"]
    full_data, bare_data = model_data(), model_data(words=False, refusals=False)
    assert model_data(words=False)["checks"] == full_data["checks"]  # a widget that shows refusals keeps them
    assert [check[0] for check in bare_data["checks"]] == [check[0] for check in full_data["checks"]]
    assert {json.dumps(check[1]) for check in bare_data["checks"]} == {json.dumps(["str", ""])}
    assert len(json.dumps(bare_data)) < 0.9 * len(json.dumps(full_data))
