"""Issue 14, item 2: the URL state keys are "full words, stable, versioned so old course links keep working".

Every key a widget's link may carry is a full word (letters and underscores, at least three letters), or a word the
option table gives as a command-line flag (Megatron-LM's --tp, --pp, --dp, --cp, --ep; DeepSpeed's
stage3_max_live_parameters, whose digit is DeepSpeed's own). Every key that release 0.1.0's pages wrote and that is no
longer a key is in its widget's renames table, mapped to a key the widget has now, and a renamed key is never reused.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from builder.catalog import load_gpus, load_models
from builder.model.options import OPTIONS
from builder.grids import ARCH_FIELDS
from builder.widgets import WIDGETS, calculator, calculator_state

ROOT = Path(__file__).resolve().parent.parent
CONTENT = ROOT / "content"
RELEASES = {tomllib.loads(path.read_text())["version"] for path in (CONTENT / "releases").glob("*.toml")}
# The keys release 0.1.0's widgets wrote and this release renamed, widget by widget: at commit 5f66fa5, the one that
# wrote content/releases/0.1.0.toml, builder/widgets/calculator.py's Control keys ("shard", "sp", "vpp", "formula",
# "tied"), bytes_per_param.py's data["start"] {"p", "z", "n"} and memory_budget.py's start_state {"h", "b", "s", "q"}.
RENAMED_IN_0_1_0 = {"bytes-per-param": {"p", "z", "n"}, "memory-budget": {"h", "b", "s", "q"},
                    "calculator": {"shard", "sp", "vpp", "formula", "tied"}, "serve-concurrency": set()}
# The words the command line takes as flags (the option table's), e.g. --tp -> tp.
FLAG_WORDS = {option.flag[2:].replace("-", "_") for option in OPTIONS if option.flag}
FULL_WORD = re.compile(r"[a-z]+(_[a-z]+)*")


def full_word(key: str) -> bool:
    """Letters joined by underscores, at least three letters; or a flag word of the option table."""
    return bool(FULL_WORD.fullmatch(key)) and sum(c.isalpha() for c in key) >= 3 or key in FLAG_WORDS


@pytest.fixture(scope="module")
def catalogs():
    return {"model": load_models(CONTENT / "models.toml"), "gpu": load_gpus(CONTENT / "gpus.toml"), "preset": {}}


def url_keys(name: str, catalogs) -> set[str]:
    """Every key a link to the widget may carry: the keys its link notice knows (what checkLink accepts)."""
    spec = WIDGETS[name]
    return set(spec.context({}, catalogs)["data"]["link"]["keys"]) if name != "calculator" else set(
        calculator.link_keys(calculator.catalog_gpus(catalogs["gpu"]), catalogs["model"]))


SCRIPTED = [name for name, spec in WIDGETS.items() if spec.scripted]


def test_every_scripted_widget_is_covered():
    assert set(SCRIPTED) == set(RENAMED_IN_0_1_0)


@pytest.mark.parametrize("name", SCRIPTED)
def test_every_url_key_is_a_full_word(name, catalogs):
    keys = url_keys(name, catalogs)
    assert keys, name
    assert sorted(key for key in keys if not full_word(key)) == []


@pytest.mark.parametrize("name", SCRIPTED)
def test_every_old_key_maps_to_a_current_key(name, catalogs):
    keys, table = url_keys(name, catalogs), WIDGETS[name].renamed
    assert set(table) == RENAMED_IN_0_1_0[name]
    for old, (new, release) in table.items():
        assert new in keys, (old, new)
        assert old not in keys, old  # a renamed key is never reused
        assert release in RELEASES, release
    assert len({new for new, _ in table.values()}) == len(table)  # two old keys never become one


def test_the_letters_and_megatron_flags():
    """The check itself: single letters and made-up abbreviations fail, Megatron-LM's --tp and DeepSpeed's own
    stage3_* keys pass."""
    assert not full_word("p") and not full_word("sp") and not full_word("z") and not full_word("q")
    assert full_word("tp") and full_word("dp") and full_word("stage3_max_live_parameters")
    assert full_word("sequence_parallel") and not full_word("seq-len") and not full_word("Seq_len")


def test_the_calculator_keys_come_from_the_option_table():
    """An option's control takes its key from the table's `url`; two options share one only where one control sets
    both (ZeRO / FSDP, and whose activations are counted)."""
    by_key: dict[str, set[str]] = {}
    for option in OPTIONS:
        if option.url:
            by_key.setdefault(option.url, set()).add(option.name)
            assert option.url in calculator.CONTROL_TYPES, option.name
    assert {key: names for key, names in by_key.items() if len(names) > 1} == {
        "sharding": {"zero", "fsdp"}, "implementation": {"implementation", "activation_formula"}}
    assert by_key["sequence_parallel"] == {"sequence_parallel"} and by_key["virtual_stages"] == {"pp_virtual_stages"}
    # The form's rules read a control by the option's name unless the option is in calculator_state.KEY.
    assert [o.name for o in OPTIONS if o.url and o.url != o.name and o.url not in calculator_state.KEY.values()] == []


def test_the_custom_architecture_keys_are_front_matters_arch_words():
    """The same words in front matter and URL state: each custom-architecture control is named as a bar's `arch:`
    names the field it sets."""
    assert [c.key for c in calculator.ARCH_CONTROLS if c.key not in ARCH_FIELDS] == []



def test_the_stylesheet_names_current_controls():
    """static/widgets.css shows and hides the calculator's fields by its controls' names (the URL keys): every name
    it reads is a control the form has, so a renamed key cannot leave a rule that never matches."""
    css = (ROOT / "static" / "widgets.css").read_text()
    names = set(re.findall(r"\[name=([a-z_0-9]+)\]", css))
    assert "sharding" in names and "mode" in names
    assert sorted(names - set(calculator.CONTROL_TYPES)) == []
