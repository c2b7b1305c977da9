"""A widget's data block: a large value an earlier widget on the same page already sent goes as a reference
(builder/render.py widget_json; static/widgets/99-boot.js resolves it), and the teaching widgets' full model
goes as numbers only (builder/model/partrules.RuleSet.encode words=False). The browser tests of both teaching
widgets check that the script still shows Python's numbers from it (tests/browser/test_widget_*.py)."""

from __future__ import annotations

import json
import re

import pytest

from builder.model.states import MODEL_STATES
from builder.render import SAME_AS, SHARED_MIN_CHARS, PageContext, widget_json
from builder.widgets.model_data import STAGE_SETS, model_data
from builder.widgets.packed import (CODE_ALPHABET, NAMES, REFERENCE, RULES, TEXTS, UNQUOTED, code, coded, compact,
                                    expand, pack, unpack)


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
    full_data, bare_data = unpack(model_data()), unpack(model_data(words=False, refusals=False))
    assert unpack(model_data(words=False))["checks"] == full_data["checks"]  # a widget that shows refusals keeps them
    for checks in ("checks", "shapeChecks"):  # a widget that shows no refused run or shape gets no message
        assert [check[0] for check in bare_data[checks]] == [check[0] for check in full_data[checks]]
        assert {json.dumps(check[1]) for check in bare_data[checks]} == {json.dumps(["str", ""])}
    assert len(json.dumps(model_data(words=False, refusals=False))) < 0.9 * len(json.dumps(model_data()))


def test_each_text_is_sent_once_and_the_rules_come_back_as_encode_wrote_them():
    """builder/widgets/packed.py: the model's texts (the parts' sources repeat far apart, beyond gzip's 32 KB window)
    go once in a list, each ["str", text] as ["$", i], and the rules as JSON without quotes around names; unpack
    gives back exactly what was packed."""
    for data in (model_data(), model_data(words=False, refusals=False), model_data(STAGE_SETS, words=False)):
        rules = unpack(data)
        plain = {key: value for key, value in rules.items() if key in data}
        assert pack({key: value for key, value in rules.items() if key not in plain}, plain) == data
        assert TEXTS not in rules and RULES not in rules and '"' not in data[RULES]
        texts = data[TEXTS]
        by_code = {code(index): name for index, name in enumerate(data[NAMES])}
        written = UNQUOTED.sub(lambda match: by_code[match.group(0)], data[RULES])  # names in place of their codes
        references = [int(i) for i in re.findall(rf"\[{re.escape(REFERENCE)},(\d+)\]", written)]
        assert len(set(texts)) == len(texts) and "[str," not in written
        assert len(references) == json.dumps(rules).count('["str", ') > len(texts)  # every text, each once
        assert set(references) == set(range(len(texts)))


# Names, operators (minus among them), negative and fractional numbers, a reference, a number in exponent form.
COMPACT = {"ruleSets": {"states": {"parts": [["weights/quantised_linear", [">=", "shard_stage", -1],
                                             ["/", 5, 1125899906842624], 0.5, ["$", 0], 1e20,
                                             ["-", "op_T2", -0.25]]]}}}


def test_the_compact_form_reads_back_names_numbers_and_operators():
    assert compact(COMPACT) == ("{ruleSets:{states:{parts:[[weights/quantised_linear,[>=,shard_stage,-1],"
                                "[/,5,1125899906842624],0.5,[$,0],1e+20,[-,op_T2,-0.25]]]}}}")
    assert expand(compact(COMPACT)) == COMPACT


def test_each_name_is_sent_once_as_a_code_the_most_frequent_in_one_character():
    """builder/widgets/packed.py `coded`: the rules name each symbol, operator and key by a code of CODE_ALPHABET,
    the most frequent names by one character; the codes are distinct, never read as numbers, and expand gives back
    the rules as they were written."""
    data = model_data()
    names, tokens = data[NAMES], UNQUOTED.findall(data[RULES])
    assert len(set(names)) == len(names) > len(CODE_ALPHABET)  # two-character codes are in use too
    codes = [code(index) for index in range(len(names))]
    assert len(set(codes)) == len(codes) and set(tokens) == set(codes)
    assert all(UNQUOTED.fullmatch(c) and not c[0].isdigit() for c in codes)
    counts = {name: tokens.count(c) for name, c in zip(names, codes)}
    short = [counts[name] for name in names[:len(CODE_ALPHABET)]]
    assert min(short) >= max(counts[name] for name in names[len(CODE_ALPHABET):])
    text = compact(COMPACT)
    assert expand(*coded(text)) == expand(text) == COMPACT
    with pytest.raises(ValueError):
        code(len(CODE_ALPHABET) * (len(CODE_ALPHABET) + 1))


@pytest.mark.parametrize("value", [{"rules": [REFERENCE, 3]}, {TEXTS: []}, {NAMES: []}, {"a": "two words"}, {"a": "3d"},
                                   {"a": "true"}, {"a": True}, {"a": None}, {"a": ""}, {"a": 'say "hi"'}])
def test_data_the_packing_cannot_carry_is_refused(value):
    with pytest.raises(ValueError):
        pack(value, {})


def test_an_engines_model_carries_what_its_accounting_reads():
    """serve's widget (02-model.js engineModel: stageModel) reads the named rule sets, the stages and the checks; the
    training test, dtype sizes, phase titles and the search are a full estimate's (browserModel), sent only there."""
    engine, full = unpack(model_data(STAGE_SETS, words=False)), unpack(model_data(words=False))
    assert set(engine["ruleSets"]) == set(STAGE_SETS) and set(full) - set(engine) == {
        "training", "dtypes", "phases", "largest"}
    assert engine["checks"] == full["checks"] and engine["stages"] == full["stages"]


def test_model_data_is_made_once_for_the_same_inputs_and_afresh_for_others():
    """The teaching widgets ask for the same specialised data (one site: three times); it is made once, and other
    inputs, or inputs whose repr would not say all they are, give data of their own; a varying input's value does
    not."""
    from builder.model import Config
    from builder.model.inputs import config_inputs

    fixed = config_inputs(Config())
    first = model_data(words=False, refusals=False, fixed=fixed, varying={"dp", "micro_batch"})
    assert model_data(words=False, refusals=False, fixed=dict(fixed), varying=["micro_batch", "dp"]) is first
    eight = model_data(words=False, refusals=False, fixed={**fixed, "dp": 8}, varying={"micro_batch"})
    assert eight is not first and unpack(eight) != unpack(first)
    assert model_data(words=True, refusals=False, fixed=fixed, varying={"dp", "micro_batch"}) is not first

    class Opaque:  # a value its repr does not write out: never a memo key
        def __repr__(self) -> str:
            return "Opaque"
    odd = {**fixed, "unread": Opaque()}
    again = model_data(words=False, refusals=False, fixed=odd, varying={"dp", "micro_batch"})
    assert again is not model_data(words=False, refusals=False, fixed=odd, varying={"dp", "micro_batch"})
    assert unpack(again) == unpack(first)
    # A varying input's value is no part of the data (specialise reads none): any of its values finds the same data
    # (the teaching widgets start at different sequence lengths), which is what that value makes afresh.
    assert model_data(words=False, refusals=False, fixed={**fixed, "dp": 8}, varying={"dp", "micro_batch"}) is first
    afresh = model_data(words=False, refusals=False, fixed={**odd, "dp": 8}, varying={"dp", "micro_batch"})
    assert afresh is not first and unpack(afresh) == unpack(first)
