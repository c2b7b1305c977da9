"""Hugging Face generate's peak (builder.model.engine_hf) against transformers 5.23.0 itself, run on CPU.

No published torch.cuda.max_memory_allocated figure for generate with a stated model, prompt and cache was found
(transformers PR #47731 shows the static cache's footprint only as a snippet), so the pins are what transformers
5.23.0 allocates, measured here: the cache objects' tensors after generate (DynamicLayer's and StaticLayer's keys
and values, cache_utils.py), the shapes of the eager scores and of the logits (a TorchDispatchMode records every
op's output), and the CPU allocator's live bytes during generate (torch.profiler memory events, the validation
suite's meter). The engine's own words on the command line are pinned too.
"""

from __future__ import annotations

import json

import pytest

from builder.catalog import default_models
from builder.cli import main
from builder.model import Config
from builder.model.engines import EngineSettings, engine_report

MODELS = default_models()
GIB = 2**30


def hf_report(config, **settings):
    return engine_report(config, EngineSettings(engine="hf", **settings), 2**40, "cpu")


def test_llama_3_8b_eager_scores_at_a_32k_prompt():
    """modeling_llama.py eager_attention_forward with a bf16 model: batch x 32 heads x 32,768 x 32,768 scores, bf16
    scores + their fp32 copy + the fp32 softmax (torch's softmax converts before it allocates): 10 B a score,
    320 GiB exactly; SDPA holds no scores, and the prefill's largest working set is the MLP's 3 x 32,768 x 14,336
    x 2 B (2.625 GiB)."""
    config = Config(model=MODELS["llama-3-8b"], mode="serve", batch=1, context=32768)
    eager = hf_report(config, attn_implementation="eager").values
    sdpa = hf_report(config).values
    assert eager["attention_work"] == 320 * GIB and eager["score_bytes"] == 10
    assert not sdpa["attention_wins"] and sdpa["mlp_work"] == 3 * 32768 * 14336 * 2
    # The dynamic cache after prompt + 20 - 1 tokens: 32 layers x 2 x 8 KV heads x 128 x 2 B = 128 KiB a token.
    assert sdpa["cache_decode"] == 131072 * (32768 + 19)
    assert sdpa["attn_implementation"] == "sdpa" and sdpa["max_new_tokens"] == 20  # transformers' defaults


def test_static_cache_is_allocated_to_max_cache_len_up_front():
    """generation/utils.py: max_cache_len = prompt + max_new_tokens - 1, or GenerationConfig.max_cache_len when
    larger; StaticLayer allocates all of it on its first update, in the prefill."""
    config = Config(model=MODELS["llama-3-8b"], mode="serve", batch=8, context=8192)
    static = hf_report(config, cache_implementation="static", max_new_tokens=512).values
    dynamic = hf_report(config, max_new_tokens=512).values
    assert static["cache_prefill"] == static["cache_decode"] == 8 * 131072 * (8192 + 511)
    assert dynamic["cache_prefill"] == 8 * 131072 * 8192
    assert dynamic["concat_copy"] == 8 * 65536 // 32 * (8192 + 510)  # one layer's old keys at the last cat
    longer = hf_report(config, cache_implementation="static", max_new_tokens=512, max_cache_len=16384).values
    assert longer["cache_decode"] == 8 * 131072 * 16384


torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def tiny_llama():
    """A small Llama whose attention dominates: 16 heads, 4 KV heads of 16, hidden 64."""
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                       num_attention_heads=16, num_key_value_heads=4, head_dim=16, max_position_embeddings=4096,
                       tie_word_embeddings=False)


def run_generate(attn, cache, batch, prompt, new, meter=None, **kwargs):
    from transformers import LlamaForCausalLM
    torch.manual_seed(0)
    ids = torch.randint(0, 512, (batch, prompt))
    model = LlamaForCausalLM(tiny_llama()).to(torch.bfloat16).eval()
    model.set_attn_implementation(attn)
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, cache_implementation=cache,
                             pad_token_id=0, return_dict_in_generate=True, **kwargs)
    return model, out


def tiny_values(attn, cache, batch, prompt, new, **settings):
    from builder.model.architecture import from_hf_config
    config = Config(model=from_hf_config(tiny_llama().to_dict()), mode="serve", batch=batch, context=prompt)
    return hf_report(config, attn_implementation=attn, cache_implementation=cache, max_new_tokens=new,
                     **settings).values


@pytest.mark.parametrize("cache, settings, kwargs", [
    ("dynamic", {}, {}), ("static", {}, {}), ("static", {"max_cache_len": 64}, {"max_cache_len": 64})])
def test_cache_bytes_are_what_transformers_allocates(cache, settings, kwargs):
    """The cache object after generate: DynamicLayer keys/values of prompt + new - 1 tokens, StaticLayer's of
    max_cache_len (cache_utils.py, transformers 5.23.0)."""
    _, out = run_generate("sdpa", cache, 3, 37, 5, **kwargs)
    held = sum(layer.keys.nbytes + layer.values.nbytes for layer in out.past_key_values.layers)
    assert held == tiny_values("sdpa", cache, 3, 37, 5, **settings)["cache_decode"]
    assert {tuple(layer.keys.shape) for layer in out.past_key_values.layers} == {
        (3, 4, 64 if kwargs else 41, 16)}


def recorded_shapes(attn, cache, **kwargs):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.outputs = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor):
                self.outputs.append((func.overloadpacket.__name__, tuple(out.shape), out.dtype))
            return out

    record = Record()
    with record:
        run_generate(attn, cache, 3, 37, 5, **kwargs)
    return record.outputs


@pytest.mark.parametrize("cache, keys", [("dynamic", 37), ("static", 41)])
def test_eager_materialises_fp32_scores_over_every_key(cache, keys):
    """eager_attention_forward: softmax(dtype=float32) of (batch, heads, prompt, keys); with a static cache the keys
    are all max_cache_len of them. SDPA records no such tensor."""
    eager = recorded_shapes("eager", cache)
    assert ("_softmax", (3, 16, 37, keys), torch.float32) in eager
    assert ("_to_copy", (3, 16, 37, keys), torch.float32) in eager  # the bf16 scores converted first
    assert tiny_values("eager", cache, 3, 37, 5)["prefill_keys"] == keys
    assert not [o for o in recorded_shapes("sdpa", cache) if o[1][-2:] == (37, keys) and len(o[1]) == 4
                and o[1][1] == 16]


@pytest.mark.parametrize("keep, rows", [(None, 1), (0, 37)])
def test_prefill_logits_rows_follow_logits_to_keep(keep, rows):
    """generate passes logits_to_keep=1 (Llama's forward takes it); logits_to_keep=0 makes every prompt row."""
    outputs = recorded_shapes("sdpa", "dynamic", **({} if keep is None else {"logits_to_keep": keep}))
    assert ("_unsafe_view", (3, rows, 512), torch.bfloat16) in outputs or ("mm", (3 * rows, 512), torch.bfloat16) \
        in outputs
    values = tiny_values("sdpa", "dynamic", 3, 37, 5, **({} if keep is None else {"logits_to_keep": keep}))
    assert values["prefill_logits"] == 3 * rows * 512 * 2


def test_eager_prefill_peak_matches_the_measured_cpu_peak():
    """Live bytes of the CPU allocator during generate (torch.profiler memory events): at a 512-token prompt the
    eager prefill's scores dominate, and the modelled peak above the weights is within 5% of the measured one
    (the eager mask, 1 MiB here, and rotary temporaries are left out); SDPA's measured peak stays under a tenth of
    eager's."""
    from builder.validate.peak import CpuMeter

    measured = {}
    for attn in ("eager", "sdpa"):
        with CpuMeter() as meter:
            with meter.phase("generate", True):
                model, _ = run_generate(attn, "dynamic", 2, 512, 4)
        weights = sum(p.nbytes for p in model.parameters())
        measured[attn] = meter.peaks["generate"] - weights
    values = tiny_values("eager", "dynamic", 2, 512, 4)
    modelled = values["peak"] - values["weights_bytes"]
    assert values["prefill_is_peak"]
    assert abs(modelled - measured["eager"]) <= 0.05 * measured["eager"]
    assert measured["sdpa"] < measured["eager"] / 10


def run_cli(capsys, *args):
    code = main(["estimate", "--mode", "serve", "--engine", "hf", "--gpu", "h100-80gb", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("args, flag", [
    (["--model", "llama-3-8b", "--max-cache-len", "9000"], "--max-cache-len"),
    (["--model", "llama-3-8b", "--gpu-memory-utilization", "0.5"], "--gpu-memory-utilization"),
    (["--model", "llama-3-8b", "--tp", "2"], "--tp"),
    (["--model", "llama-3-8b", "--attention", "eager", "--attn-implementation", "sdpa"], "--attn-implementation"),
    (["--model", "llama-3-8b", "--kv-dtype", "fp8"], "--kv-dtype"),
])
def test_bad_input_is_one_line_naming_the_flag(capsys, args, flag):
    code, _, err = run_cli(capsys, *args)
    assert code == 2
    err = err.strip().splitlines()
    assert len(err) == 1 and f"argument {flag}" in err[0]


def test_cli_prints_both_moments_and_json(capsys):
    code, out, _ = run_cli(capsys, "--model", "llama-3-8b", "--context", "32768", "--attn-implementation", "eager")
    assert code == 0 and "attention_scores" in out and "320.00 GiB" in out and "does not fit" in out
    code, out, _ = run_cli(capsys, "--model", "llama-3-8b", "--context", "8192", "--batch", "8",
                           "--cache-implementation", "static", "--max-new-tokens", "512", "--json")
    data = json.loads(out)
    assert data["cache_tokens"] == 8703 and data["kv_cache_bytes"] == 8 * 131072 * 8703 and data["fits"]
