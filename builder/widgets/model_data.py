"""The memory model as data for the browser: what static/widgets/02-model.js evaluates.

One function, `model_data()`, emits builder.model's rule sets (parameter tensors, placement, model states,
saved activations and the instants inside a layer, autocast copies, serving, communication, host memory,
overheads and the moments of a step), the pipeline stages, the configuration checks, the dtype sizes and the search
for the largest value that fits.
Every widget that shows the full model's number (the calculator, the teaching widgets' "the full model
says" line) sends this and lets the shared script evaluate it, so no script holds a formula of its own. The data
travels packed (builder/widgets/packed.py: each distinct text once, names without quotes; the script unpacks it
once before compiling).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable, Collection, Mapping, Sequence

from builder.model.activations import ACTIVATIONS, MOMENTS, OP_CONDITIONS
from builder.model.autocast import AUTOCAST_COPIES
from builder.model.checkpoint import CHECKPOINT_SAVE
from builder.model.checks import CHECKS, SHAPE_CHECKS, encode_checks
from builder.model.expr import encode, eq, sym
from builder.model.overheads import OVERHEADS
from builder.model.partrules import EMPTY_TEXT
from builder.model.placement import HOLDING, STAGES
from builder.model.search import LARGEST
from builder.model.serving import SERVING
from builder.model.states import COMM, HOST, MODEL_STATES
from builder.model.step import PHASE_TITLES, STEP
from builder.model.tensors import SHAPES
from builder.model.units import DTYPE_BYTES
from builder.widgets import packed
from builder.widgets.specialise import prune, specialise

# The rule sets the script evaluates, by the name it reads them under.
RULE_SETS = {"shapes": SHAPES, "holding": HOLDING, "states": MODEL_STATES, "conditions": OP_CONDITIONS,
             "activations": ACTIVATIONS, "moments": MOMENTS, "autocast": AUTOCAST_COPIES,
             "checkpoint": CHECKPOINT_SAVE, "serving": SERVING,
             "comm": COMM, "host": HOST, "overheads": OVERHEADS, "step": STEP}
# The derived symbols static/widgets/02-model.js looks up by name (`look`, and the step's own values), beside those
# the rules read: a specialised model keeps these and drops the symbols nothing reads (specialise.prune).
READ = ("offloaded", "host_copies", "step_need", "peak_phase")
# A run is priced as training (saved activations, the moments of a step) or as serving (the KV cache).
TRAINING = eq(sym("mode"), "train")


def json_value(value: Any) -> Any:
    """An input as JSON: an exact fraction as the nearest double."""
    return float(value) if isinstance(value, Fraction) else value


# What one GPU of a stage holds and its weights: enough for an engine's accounting (02-model.js stageModel).
STAGE_SETS = ("shapes", "holding", "states")


def model_data(sets: tuple[str, ...] | None = None, source_html: Callable[[str], str] = html.escape,
               words: bool = True, refusals: bool = True, fixed: Mapping[str, Any] | None = None,
               varying: Collection[str] = (), domain: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The rule sets, stages, checks, dtype sizes and phase titles, as JSON-ready data packed (packed.pack: each
    distinct text once, the rules compact; packed.unpack gives them as `encode` wrote them). `sets`: the named rule sets
    only, with what 02-model.js stageModel reads beside them (the stages and the checks: an engine's accounting),
    and nothing a full estimate adds (the training test, dtype sizes, phase titles, the search); `source_html`
    renders the parts' sources (builder.sources.html_renderer: citations linked); `words=False` leaves out the
    parts' words (per-unit words, notes, sources) for a widget that shows no part's words, and `refusals=False` the
    checks' messages for one that never shows a refused run or shape (the teaching widgets); `fixed`: the inputs
    (name -> value) every run of the widget keeps, all but those named in `varying`, whose consequences are worked
    out before sending (builder.widgets.specialise: the rules those values never reach are left out, and so is the
    search for the largest value that fits, which such a widget never runs); `domain`: the values some varying inputs
    take together, one mapping per possibility, where the widget's runs take no others (the catalog models' shapes:
    specialise.Domain)."""
    runs = Fixed(repr([sorted(entry.items()) for entry in domain]), tuple(domain))
    # The memo key holds the fixed inputs that are not varying: specialise reads no value of a varying one, so widgets
    # whose runs differ only there (the two teaching widgets' starting sequence) share one specialised model.
    kept = None if fixed is None else {name: value for name, value in fixed.items() if name not in varying}
    if kept is not None and not (is_plain(kept) and all(is_plain(dict(entry)) for entry in domain)):
        return made.__wrapped__(sets, source_html, words, refusals, Fixed("", fixed), frozenset(varying), runs)
    return made(sets, source_html, words, refusals, None if fixed is None else Fixed(repr(sorted(kept.items())), fixed),
                frozenset(varying), runs)


PLAIN = (bool, int, float, str, Fraction, type(None))


def is_plain(value: Any) -> bool:
    """Whether `value` is data its repr writes out whole (numbers, text, None, and lists, tuples and mappings of
    them), so that equal reprs mean equal values."""
    if isinstance(value, PLAIN):
        return True
    if isinstance(value, (list, tuple)):
        return all(is_plain(item) for item in value)
    if isinstance(value, dict):
        return all(is_plain(key) and is_plain(item) for key, item in value.items())
    return False


@dataclass(frozen=True)
class Fixed:
    """A widget's fixed inputs as a memo key: the repr of those not varying, name by name (is_plain data only)."""

    key: str
    inputs: Mapping[str, Any] = field(compare=False, hash=False)


@lru_cache(maxsize=4)
def made(sets: tuple[str, ...] | None, source_html: Callable[[str], str], words: bool, refusals: bool,
         fixed: Fixed | None, varying: frozenset[str], domain: Fixed) -> dict[str, Any]:
    """model_data's work, memoised on all it depends on besides this code (the teaching widgets on one site ask for
    the same data several times: about 0.15 s each). The data is shared: the widgets only serialise it."""
    def checks(listed: tuple = CHECKS) -> list[list[Any]]:
        return encode_checks(listed) if refusals else [[refused, EMPTY_TEXT] for refused, _ in encode_checks(listed)]

    sent = {
        "ruleSets": {name: rules.encode(source_html, words) for name, rules in RULE_SETS.items()
                     if sets is None or name in sets},
        "stages": encode(STAGES),
        "checks": checks(),
        "shapeChecks": checks(SHAPE_CHECKS),
    }
    plain = {}
    if sets is None:
        # The search for the largest batch or sequence that fits (builder.model.search.LARGEST, as --max runs it).
        sent |= {"training": encode(TRAINING), "largest": LARGEST.encode()}
        # The dtype sizes and the moments of a step in words (builder.model.step's rules name the one that sets the
        # need), read by the teaching widgets' scripts as they are.
        plain = {"dtypes": {name: float(size) for name, size in DTYPE_BYTES.items()}, "phases": PHASE_TITLES}
    if fixed is not None:
        sent = specialise(sent, fixed.inputs, set(varying), domain.inputs)
        if sent.get("training") == 1:  # every run is priced as training: the serving rules are never evaluated
            sent["ruleSets"]["serving"] = {"reads": [], "symbols": [], "parts": []}
        # A widget whose runs keep inputs fixed (a teaching widget) prices runs and never searches (--max is the
        # calculator's): no search, and then no symbol only the search read (prune).
        sent.pop("largest", None)
        sent = prune(sent, READ)
    return packed.pack(sent, plain)
