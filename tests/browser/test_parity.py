"""Parity of the browser and Python (issue 14, "Tests and measures"): over more than 1,000 random states drawn by
hypothesis across every widget that shows the model's numbers, the parts, their sum, the need and the moment of a
step that sets it, the verdicts and the --max answers the browser shows are byte-identical to Python's.

Each widget's states are evaluated in one page, a batch per `page.evaluate` (the controls set as a reader sets them,
one change event, the figure read back), while a thread works out Python's side of the same batch: a batch costs
what the slower of the two costs. The states come from hypothesis strategies, accepted and refused ones (a refused
state must show validate_config's sentence and no figure); `derandomize` makes every run draw the same states, and
`max_examples` is set per widget so the whole file stays within about a minute on two cores. Distinct states (the first
batch of each run is hypothesis's simplest state, repeated): calculator 201 (72 refused, 48 served), bytes per
parameter 234 on the home page and 98 with author options, memory budget 201 and 101 in single-total mode, serving 201;
1,036 in all, and each test holds a floor on its own.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from builder.model.config import FLOAT8_RECIPES, LOSSES, OPTIMIZER_IMPLS, OPTIMIZERS, PRECISIONS, validate_config
from builder.widgets import calculator as calc
from builder.widgets.serve_concurrency import CONTROLS, KV_CHOICES, TP_CHOICES, evaluate
from tests.browser import test_widget_bytes_per_param as bpp
from tests.browser import test_widget_calculator as calculator
from tests.browser import test_widget_memory_budget as budget
from tests.browser import test_widget_serve as serve
from tests.browser.test_widget_bytes_per_param import open_fixture, widget_site, widget_site_url  # noqa: F401

pytestmark = pytest.mark.browser

MODELS = calculator.MODELS


def parity(batches: int):
    """The settings of a parity run: `batches` batches, the same states on every run, no example database."""
    return settings(max_examples=batches, derandomize=True, database=None, deadline=None,
                    phases=(Phase.explicit, Phase.generate),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def run_batches(page, script: str, selector: str, states: list, python) -> list[tuple]:
    """(state, what the widget shows, Python's) for each of `states`: the widget's readings in one evaluate, Python's
    (`python(state)`) worked out in a thread meanwhile."""
    with ThreadPoolExecutor(1) as pool:
        wanted = pool.submit(lambda: [python(state) for state in states])
        got = page.evaluate(script, [selector, states])
        return list(zip(states, got, wanted.result()))


def key(state: dict) -> str:
    return json.dumps(state, sort_keys=True)


# The calculator ----------------------------------------------------------------------------------------------------

def divisors(n: int, candidates=(1, 2, 3, 4, 5, 6, 8, 16)) -> list[int]:
    return [c for c in candidates if n % c == 0]


def often(value, times: int = 2) -> list:
    """`value` repeated: a choice drawn more often than the others."""
    return [value] * times


@st.composite
def calculator_states(draw, defaults: dict[str, str]) -> dict[str, str]:
    """A state of the calculator's form: a catalog or custom model, training (every precision, optimizer, recompute,
    attention, formula, sharding, offload, LoRA, dtype, ZeRO-3 limit and bucket) or serving, parallel degrees mostly
    valid; about one in seven carries a change the model refuses (builder.model.checks), so refusals are drawn too."""
    s = dict(defaults)
    pick = lambda values: draw(st.sampled_from(list(values)))  # noqa: E731
    if pick([True, False, False]):
        heads = pick([4, 8, 12, 16, 32])
        experts = pick([0, 0, 4, 8])
        s.update(model="custom", layers=str(draw(st.integers(2, 40))), heads=str(heads),
                 kv_heads=str(pick(divisors(heads, (1, 2, 4, heads)))), head_dim=str(pick([32, 64, 128])),
                 hidden=str(pick([256, 512, 768, 1024, 2048, 3000])), ffn=str(pick([0, 1024, 2816, 5000])),
                 vocab=str(pick([1000, 32000, 50257, 151936])), mlp=pick(["swiglu", "gelu"]),
                 norm=pick(["rmsnorm", "layernorm"]), tied_embeddings=pick("01"), experts=str(experts),
                 top_k=str(draw(st.integers(1, 2))))
        if experts == 0 and s["ffn"] == "0":
            s["ffn"] = "1024"
        arch = calc.custom_arch(s)
    else:
        s["model"] = pick(MODELS)
        arch = MODELS[s["model"]]
    train = pick([True, True, True, False])
    s["mode"] = "train" if train else "serve"
    tp = pick([t for t in (1, 1, 2, 4, 8) if arch.heads % t == 0 and (arch.n_kv_heads % t == 0 or t % arch.n_kv_heads == 0)])
    pp = pick([p for p in (1, 1, 2, 3, 4) if p <= arch.layers])
    vpp = pick([v for v in (1, 2) if v == 1 or arch.layers % (pp * v) == 0])
    dp = pick([1, 2, 4, 8, 6, 16])
    ep = pick([e for e in (1, 2, 4) if e == 1 or (arch.is_moe and arch.experts % e == 0 and dp % e == 0)])
    seq = pick([128, 512, 1000, 2048, 4096, 8192, 32768])
    cp = pick([c for c in (1, 1, 2, 4) if seq % c == 0])
    s.update(tp=str(tp), pp=str(pp), virtual_stages=str(vpp), dp=str(dp), ep=str(ep), cp=str(cp), sequence_parallel=pick("01"),
             gpu=pick(g[0] for g in calculator.GPUS), overhead=str(pick([0, 0, 1, 5, 10, 17, 57, 99])),
             unit=pick(["GiB", "GB"]))
    if train:
        shard = pick(["0", "1", "2", "3", "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"])
        if shard == "HYBRID_SHARD" and dp % min(dp, 8):
            shard = "FULL_SHARD"
        stage = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0, "HYBRID_SHARD": 3}.get(shard)
        stage = int(shard) if stage is None else stage
        lora = pick([0, 0, 0, 8, 64])
        s.update(precision=pick(PRECISIONS), optimizer=pick(OPTIMIZERS),
                 offload=pick(often("none") + (["optimizer"] if stage >= 1 else []) + (["params", "both"] if stage >= 3 else [])),
                 param_dtype=pick(["policy", "policy", *calc.PARAM_DTYPES]),
                 reduce_dtype=pick(["policy", "policy", *calc.REDUCE_DTYPES]),
                 micro_batch=str(pick([1, 2, 3, 8, 64])), seq_len=str(seq), grad_accum=str(pick([1, 2, 8])),
                 recompute=pick(["none", "selective", "full"]), attention=pick(["eager", "sdpa", "flash"]),
                 implementation=pick(["hf", "hf", "megatron", "torchtune", "korthikanti"]), dropout=pick("01"), sharding=shard,
                 lora_rank=str(lora), qlora=pick("01") if lora else "0",
                 lora_dropout=pick(["0", "0.05", "0.1"]) if lora else "0")
        s["optimizer_impl"] = pick(["default", "default", *OPTIMIZER_IMPLS])
        s["loss"] = pick(["eager", *LOSSES]) if s["implementation"] != "korthikanti" else "eager"
        s["offload_activations"] = pick("001") if s["implementation"] != "korthikanti" else "0"
        # A checkpoint save the sharding offers (builder.model.checks refuses the others).
        saves = (["full-state-dict", "full-state-dict-offload", "dcp"] + (["sharded-state-dict"] if stage else [])
                 if shard in calc.FSDP_STRATEGIES else ["deepspeed"] + (["deepspeed-16bit"] if stage == 3 else [])
                 + ([] if stage else ["torch-save", "dcp"]))
        s["checkpoint_save"] = pick(["none", "none", *saves])
        if shard == "3" and pick([True, False]):  # DeepSpeed ZeRO-3's limits
            s.update(stage3_max_live_parameters=str(pick([0, 10**8, 10**9])),
                     stage3_prefetch_bucket_size=str(pick([0, 5 * 10**7, 10**9])),
                     stage3_param_persistence_threshold=str(pick([0, 10**5, 10**7])),
                     stage3_max_reuse_distance=str(pick([0, 10**9, 10**12])))
        if shard in ("1", "2", "3") and pick([True, False]):  # DeepSpeed ZeRO's gradient buckets
            s.update(reduce_bucket_size=str(pick([0, 2 * 10**8, 5 * 10**8])),
                     overlap_comm=pick(["default", "on", "off"]), contiguous_gradients=pick("01"))
        if shard == "0":
            s["gradient_as_bucket_view"] = pick("01")
        # torch.compile is modelled over transformers' dense layers without a recipe, with adapters only torchtune's on
        # Llama-family layers without LoRA dropout (else refused).
        compiled_lora = not lora or (s["implementation"] == "torchtune" and s["lora_dropout"] == "0"
                                     and arch.norm == "rmsnorm")
        s["compile"] = pick("001") if s["implementation"] in ("hf", "torchtune") and not arch.experts and compiled_lora \
            and not PRECISIONS[s["precision"]].recipe else "0"
        # torchao's float8 training (builder.model.float8), its all-gather and the output layer left in bf16.
        s["float8"] = pick(["none", "none", "none", *FLOAT8_RECIPES])
        s["enable_fsdp_float8_all_gather"] = pick("001") if s["float8"] == "tensorwise" else "0"
        s["float8_filter_output"] = pick("01") if s["float8"] != "none" else "0"
        s["compile"] = "0" if s["float8"] != "none" else s["compile"]  # compiled float8 layers: refused
        if s["recompute"] == "full" and s["implementation"] != "korthikanti" and arch.layers // pp > 1 and pick([1, 0, 0]):
            s["recompute_layers"] = str(draw(st.integers(1, arch.layers // pp - 1)))
        for option, choices in (("optimizer_state_dtype", calc.STATE_DTYPES), ("exp_avg_dtype", calc.STATE_DTYPES),
                                ("exp_avg_sq_dtype", calc.STATE_DTYPES), ("grad_accum_dtype", calc.GRAD_ACCUM_DTYPES)):
            s[option] = pick(["policy"] * 3 + list(choices))
        # Settings a combination refuses go back to their plain value, so that most states are accepted.
        for _ in range(8):
            try:
                validate_config(calc.config_from_state(s, MODELS))
                break
            except ValueError as error:
                option = str(error).split(":")[0]
                # torchtune trains in one dtype (builder.model.checks): its runs go to precision bf16.
                plain = {"optimizer_impl": "default", "optimizer": "adamw", "checkpoint_save": "none", "offload": "none",
                         "precision": "bf16",
                         "float8": "none", "enable_fsdp_float8_all_gather": "0", "float8_filter_output": "0",
                         **{name: "policy" for name in calc.DTYPE_OVERRIDES}}
                if option not in plain or s[option] == plain[option]:
                    break
                s[option] = plain[option]
    else:
        s.update(weights=pick(calc.SERVE_WEIGHTS), kv_dtype=pick(calc.KV_DTYPES),
                 batch=str(pick([1, 4, 16, 64, 256])), context=str(pick([512, 4096, 32768, 131072])))
    refused = pick(calculator.INVALID) if draw(st.integers(0, 6)) == 0 else None
    if refused and (refused.get("model") != "custom" or s["model"] == "custom"):
        s.update(refused)
    return s


# One state at a time: each read waits for that state's answers (calculator.READ).
CALCULATOR_BATCH = ("async ([selector, states]) => { const out = []; for (const state of states) { ("
                    + calculator.SET_STATE + ")([selector, state]); out.push(await (" + calculator.READ
                    + ")(selector)); } return out; }")


def test_calculator_states_are_byte_identical(open_page):
    """Parts (names, bytes, per-unit words, sources), their sum, the need and the moment of a step that sets it,
    the verdict on every GPU, the largest micro-batch and sequence (--max), the suggestions and the refusals: the
    same bytes and words as builder.model for every state; 1-byte differences are differences."""
    seen = {}
    with open_page(calculator.PAGE) as visit:
        data = calculator.widget_data(visit.page)
        calculator.DEFAULTS[0] = data["defaults"]

        @parity(batches=6)
        @given(st.lists(calculator_states(data["defaults"]), min_size=40, max_size=40))
        def batch(states):
            python = lambda state: calculator.expected(state, data["shown"], data["defaults"])  # noqa: E731
            problems = []
            for index, (state, got, want) in enumerate(run_batches(visit.page, CALCULATOR_BATCH, calculator.WIDGET,
                                                                   states, python)):
                where = f"state {index} {json.dumps({k: v for k, v in state.items() if v != data['defaults'][k]})}"
                if got["state"] != state:
                    problems.append(f"{where}: the form did not take the state: {got['state']}")
                problems += calculator.compare(got, want, where)[0]
                if not want["error"] and got["total"] != want["total"]:
                    problems.append(f"{where}: sum of parts {got['total']} != {want['total']}")
                seen[key(state)] = (bool(want["error"]), state["mode"])
            assert problems == [], "\n".join(problems[:10])

        batch()
        assert visit.problems() == []
    refused = sum(error for error, _ in seen.values())
    serving = sum(mode == "serve" for _, mode in seen.values())
    print(f"calculator: {len(seen)} distinct states, {refused} refused, {serving} serving")
    assert len(seen) >= 200 and refused >= 40 and serving >= 40


# The bytes-per-parameter widget, on the home page and with author options ------------------------------------------

def bpp_actions(data: dict):
    """A slider step or a preset, a ZeRO stage and a GPU count (the GPU count's whole range, 1 to 4,096)."""
    place = st.one_of(st.fixed_dictionaries({"step": st.integers(0, len(data["ticks"]) - 1)}),
                      st.fixed_dictionaries({"preset": st.integers(0, len(data["presets"]) - 1)}))
    rest = st.fixed_dictionaries({"zero": st.integers(0, 3),
                                  "gpus": st.one_of(st.sampled_from([1, 2, 3, 7, 8, 64, 512]), st.integers(1, 4096))})
    return st.tuples(place, rest).map(lambda pair: pair[0] | pair[1])


# One action at a time: each read waits until nothing is aria-busy (bpp.DRIVE).
BPP_BATCH = ("async ([selector, actions]) => { const out = []; for (const action of actions) out.push(await ("
             + bpp.DRIVE.replace("READ(root)", f"({bpp.READ})(root)") + ")([selector, action])); return out; }")


def check_bpp(page, data: dict, batches: int) -> dict:
    """`batches` batches of actions on the widget in `page`: every shown text and byte is Python's."""
    seen = {}

    def state(action: dict) -> tuple[int, int, int]:
        """The parameters, ZeRO stage and GPU count an action leads to."""
        params = data["ticks"][action["step"]]["value"] if "step" in action else data["presets"][action["preset"]]["params"]
        return params, action["zero"], action["gpus"]

    @parity(batches=batches)
    @given(st.lists(bpp_actions(data), min_size=50, max_size=50))
    def batch(actions):
        python = lambda action: bpp.expected(data, *state(action))  # noqa: E731
        for action, shown, want in run_batches(page, BPP_BATCH, bpp.WIDGET, actions, python):
            assert (shown["params"], shown["zero"], shown["gpus"]) == state(action), action
            bpp.assert_matches_python(shown, data, want)
            seen[state(action)] = action
    batch()
    return seen


def test_bytes_per_param_states_are_byte_identical(open_page, open_fixture):
    with open_page("index.html") as visit:
        home = check_bpp(visit.page, bpp.widget_data(visit.page), 6)
        assert visit.problems() == []
    with open_fixture("index.html") as visit:
        data = bpp.widget_data(visit.page)
        assert [s["text"] for s in data["segments"]] == ["0.5", "1.5", "1/3"]
        authored = check_bpp(visit.page, data, 3)
        assert visit.problems() == []
    print(f"bytes per parameter: {len(home)} distinct states on the home page, {len(authored)} with author options")
    assert len(home) >= 220 and len(authored) >= 90


# The memory budget, on the home page and in single-total mode -------------------------------------------------------

def budget_actions(bounds: tuple):
    """The four controls set within the sliders' bounds."""
    return st.fixed_dictionaries({"h": st.integers(*bounds[0]), "b": st.integers(*bounds[1]),
                                  "s": st.integers(*bounds[2]), "q": st.sampled_from(["fp32", "bf16", "fp16", "fp8"])})


BUDGET_BATCH = ("async ([selector, actions]) => { const out = []; for (const action of actions) out.push(await ("
                + budget.DRIVE.replace("READ(root)", f"({budget.READ})(root)") + ")([selector, action])); return out; }")


def check_budget(page, data: dict, bounds: tuple, batches: int) -> dict:
    seen = {}

    @parity(batches=batches)
    @given(st.lists(budget_actions(bounds), min_size=50, max_size=50))
    def batch(actions):
        python = lambda state: budget.python(state["h"], state["b"], state["s"], state["q"], data)  # noqa: E731
        for state, shown, worked in run_batches(page, BUDGET_BATCH, budget.WIDGET, actions, python):
            assert {k: shown[k] for k in state} == state, (state, shown)
            budget.assert_matches_python(shown, data, worked)
            seen[tuple(state.values())] = state
    batch()
    return seen


def test_memory_budget_states_are_byte_identical(open_page, open_fixture):
    with open_page("index.html") as visit:
        home = check_budget(visit.page, bpp.widget_data(visit.page, budget.WIDGET), ((1, 350), (1, 64), (9, 15)), 5)
        assert visit.problems() == []
    with open_fixture("index.html") as visit:
        single = check_budget(visit.page, bpp.widget_data(visit.page, budget.WIDGET), ((2, 140), (1, 16), (8, 13)), 3)
        assert visit.problems() == []
    print(f"memory budget: {len(home)} distinct states on the home page, {len(single)} in single-total mode")
    assert len(home) >= 200 and len(single) >= 100


# The serving widget -------------------------------------------------------------------------------------------------

serve_actions = st.fixed_dictionaries({
    "engine": st.sampled_from(list(CONTROLS)), "model": st.sampled_from(list(serve.MODELS)),
    "gpu": st.sampled_from(list(serve.GPUS)), "tp": st.sampled_from(list(TP_CHOICES)),
    "kv_dtype": st.sampled_from([k for k, _ in KV_CHOICES]),
    "length": st.one_of(st.sampled_from([1, 512, 2048, 4096, 8192, 32768, 131072]), st.integers(1, 300_000)).map(str),
    "share": st.one_of(st.sampled_from(["", "0.5", "0.7", "0.85", "0.9", "0.95"]),
                       st.integers(30, 98).map(lambda n: str(n / 100)))})


def python_state(action: dict) -> dict:
    """The state an action sets, as serve_concurrency reads it (the engine's own words for length and share)."""
    words = CONTROLS[action["engine"]]
    return {k: v for k, v in action.items() if k not in ("length", "share")} | {
        words["length"]: action["length"], words["share"]: action["share"]}


def python(action: dict) -> dict:
    return evaluate(python_state(action), serve.MODELS, serve.GPUS)


SERVE_BATCH = "([selector, actions]) => actions.map((action) => (" + serve.DRIVE + ")([selector, action]))"


def test_serving_states_are_byte_identical(open_page):
    """Requests that fit, the pool, the engine's parts and the bar under vLLM's and SGLang's own accounting."""
    seen = {}
    with open_page(serve.PAGE) as visit:
        @parity(batches=5)
        @given(st.lists(serve_actions, min_size=50, max_size=50))
        def batch(actions):
            for action, shown, want in run_batches(visit.page, SERVE_BATCH, serve.WIDGET, actions, python):
                assert serve.python_state(shown) == python_state(action), action
                serve.assert_matches_python(shown, want)
                seen[key(action)] = shown["requests"]
        batch()
        assert visit.problems() == []
    refused = sum(requests == 0 for requests in seen.values())
    print(f"serving: {len(seen)} distinct states, {refused} where no request fits")
    assert len(seen) >= 200 and refused >= 40
