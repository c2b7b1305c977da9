"""Hugging Face generate's peak (builder.model.engine_hf) against transformers 5.23.0 itself, run on CPU.

No published torch.cuda.max_memory_allocated figure for generate with a stated model, prompt and cache was found
(transformers PR #47731 shows the static cache's footprint only as a snippet), so the pins are what transformers
5.23.0 allocates, measured here: the cache objects' tensors after generate (DynamicLayer's and StaticLayer's keys
and values, cache_utils.py), the shapes of the eager scores and of the logits (a TorchDispatchMode records every
op's output), and the CPU allocator's live bytes during generate (torch.profiler memory events, the validation
suite's meter). The engine's own words on the command line are pinned too.
"""

from __future__ import annotations

import contextlib
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
    """Every op's output while generate runs (Record, below)."""
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
    (["--model", "gemma-2-9b", "--attn-implementation", "sdpa"], "--attn-implementation"),
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


def test_gemma_2_9b_sliding_layers_hold_the_prompt_until_the_first_decode_step():
    """Gemma 2 9B (huggingface.co/google/gemma-2-9b config.json: 42 layers, 8 KV heads of 256, sliding_window 4096 in
    every other layer): 2 x 8 x 256 x 2 B = 8 KiB a token and layer. DynamicSlidingWindowLayer.update
    (cache_utils.py lines 222-259, transformers 5.23.0) keeps a view of the concatenation, so after the prefill all 42
    layers hold the 8,192-token prompt; after the last step the 21 full layers hold 8,192 + 511 tokens and the 21
    sliding ones 4,096. StaticSlidingWindowLayer allocates min(4096, max_cache_len) slots (lines 525-527)."""
    config = Config(model=MODELS["gemma-2-9b"], mode="serve", batch=8, context=8192)
    dynamic = hf_report(config, max_new_tokens=512).values
    static = hf_report(config, max_new_tokens=512, cache_implementation="static").values
    layer_token = 2 * 8 * 256 * 2
    assert dynamic["cache_prefill"] == 8 * 42 * 8192 * layer_token  # 21 GiB
    assert dynamic["cache_decode"] == 8 * 21 * (8703 + 4096) * layer_token
    assert static["cache_prefill"] == static["cache_decode"] == dynamic["cache_decode"]
    # The last step's copies: a sliding layer's K and V of its 4,096 tokens (both concatenated before either is
    # assigned), under a full layer's old K of 8,702 tokens; a full window rolled into new K and V (lines 559-564).
    assert dynamic["sliding_concat"] == 8 * 4096 * layer_token
    assert dynamic["concat_copy"] == dynamic["full_concat"] == 8 * 8702 * layer_token // 2
    assert static["roll_copy"] == 8 * 4096 * layer_token


def test_the_serving_page_quotes_the_sliding_window_numbers_the_model_gives():
    """content/serving.md's Gemma 2 9B example (8 x 8,192 prompt tokens, 512 new, flash_attention_2, H100): the
    cache after the prefill and at the last step, and both caches' prefill peaks, as the rules give them."""
    from builder.catalog import default_gpus
    from tests.page_text import page_text
    page = page_text("serving.md")
    gpu = default_gpus()["h100-80gb"]
    config = Config(model=MODELS["gemma-2-9b"], mode="serve", batch=8, context=8192)

    def values(**settings):
        return engine_report(config, EngineSettings(engine="hf", max_new_tokens=512,
                                                    attn_implementation="flash_attention_2", **settings),
                             gpu.usable_bytes, gpu.id).values
    dynamic, static = values(), values(cache_implementation="static")
    for number in (dynamic["cache_prefill"], dynamic["cache_decode"], static["prefill_peak"], dynamic["prefill_peak"]):
        assert f"{float(number) / GIB:.2f} GiB" in page


def test_deepseek_v3_caches_the_latent_but_expands_every_token_per_head():
    """DeepSeek-V3 (huggingface.co/deepseek-ai/DeepSeek-V3 config.json: 61 layers, 128 heads, kv_lora_rank 512,
    qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128). modeling_deepseek_v3.py (transformers 5.23.0) lines
    444-459 write the cache "while latent KV is still compressed": (512 + 64) x 2 B a token and layer, as vLLM's and
    SGLang's MLA caches; expand_kv (lines 407-424) then makes kv_b_proj's 128 x (128 + 128) and a key tensor of
    128 x (128 + 64) for every cached token of the layer: 114,688 B a token, more than the whole 61-layer cache's
    70,272 B a token."""
    config = Config(model=MODELS["deepseek-v3"], mode="serve", batch=4, context=4096)
    values = hf_report(config, max_new_tokens=256).values
    tokens = 4096 + 255
    assert values["cache_decode"] == 4 * tokens * 61 * (512 + 64) * 2
    assert values["decode_expansion"] == 4 * tokens * 128 * (128 + 128 + 128 + 64) * 2
    assert values["concat_copy"] == 4 * (tokens - 1) * 512 * 2  # DynamicLayer's keys are the latent
    assert values["expansion_wins"]


def test_gemma_2_falls_back_to_eager_as_from_pretrained_does():
    """modeling_gemma2.py line 352 (transformers 5.23.0): _supports_sdpa = False, so from_pretrained without
    attn_implementation runs eager (modeling_utils.py get_correct_attn_implementation), and asking for sdpa raises."""
    from transformers import Gemma2ForCausalLM
    assert Gemma2ForCausalLM._supports_sdpa is False
    config = Config(model=MODELS["gemma-2-9b"], mode="serve", batch=1, context=4096)
    assert hf_report(config).values["attn_implementation"] == "eager"
    with pytest.raises(ValueError, match="attn_implementation"):
        hf_report(config, attn_implementation="sdpa")


def tiny_gemma2():
    """A small Gemma 2: 4 layers alternating sliding (window 16) and full attention, 4 heads, 2 KV heads of 16."""
    from transformers import Gemma2Config
    return Gemma2Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=16,
                        max_position_embeddings=4096)


def tiny_mistral():
    """A small Mistral, every layer sliding (window 16): no layer_types, so transformers infers them from
    sliding_window (cache_utils.py get_layer_types_and_kwargs)."""
    from transformers import MistralConfig
    return MistralConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=16,
                         max_position_embeddings=4096, tie_word_embeddings=False)


def tiny_deepseek():
    """A small DeepSeek-V2: latent of 32, rotary key of 8, 4 heads of 16 + 8 (keys) and 16 (values), MoE after the
    first layer."""
    from transformers import DeepseekV2Config
    return DeepseekV2Config(vocab_size=512, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=32,
                            q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
                            n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
                            max_position_embeddings=4096)


TINY = {"gemma2": tiny_gemma2, "mistral": tiny_mistral, "deepseek": tiny_deepseek}


def generate_tiny(kind, attn, cache, batch, prompt, new, record=None):
    """generate on a fresh random model of `kind` (a fresh one: generate reuses a static cache across calls)."""
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    ids = torch.randint(0, 512, (batch, prompt))
    model = AutoModelForCausalLM.from_config(TINY[kind]()).to(torch.bfloat16).eval()
    model.set_attn_implementation(attn)
    with torch.no_grad(), (record if record is not None else contextlib.nullcontext()):
        out = model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, cache_implementation=cache,
                             pad_token_id=0, return_dict_in_generate=True)
    return out.past_key_values


def tiny_report(kind, attn, cache, batch, prompt, new):
    from builder.model.architecture import from_hf_config
    config = Config(model=from_hf_config(TINY[kind]().to_dict()), mode="serve", batch=batch, context=prompt)
    return hf_report(config, attn_implementation=attn, cache_implementation=cache, max_new_tokens=new).values


def storage_bytes(cache):
    """Bytes the cache's tensors keep allocated: their storages, not their views (a DynamicSlidingWindowLayer's keys
    are a view of a longer tensor)."""
    return sum(t.untyped_storage().nbytes() for layer in cache.layers for t in (layer.keys, layer.values))


@pytest.mark.parametrize("cache, prompt, new", [
    ("dynamic", 37, 5), ("dynamic", 10, 3), ("dynamic", 14, 2), ("dynamic", 37, 1),
    ("static", 37, 5), ("static", 10, 3)])
def test_sliding_cache_bytes_are_what_transformers_allocates(cache, prompt, new):
    """Gemma 2's sliding layers (window 16) after generate, transformers 5.23.0 on CPU: the storages the cache's
    tensors keep (after a single new token, the prefill's: the sliding layers' views still keep the whole prompt)."""
    held = storage_bytes(generate_tiny("gemma2", "eager", cache, 3, prompt, new))
    values = tiny_report("gemma2", "eager", cache, 3, prompt, new)
    assert held == values["cache_decode"]
    if new == 1:
        assert held == values["cache_prefill"] == 3 * 4 * prompt * 2 * 2 * 16 * 2


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_latent_cache_bytes_are_what_transformers_allocates(cache):
    """DeepSeek-V2's cache after generate, transformers 5.23.0 on CPU: keys (batch, 1, tokens, kv_lora_rank) and
    values (batch, 1, tokens, qk_rope_head_dim) in every layer (modeling_deepseek_v2.py lines 385-395)."""
    held = generate_tiny("deepseek", "sdpa", cache, 3, 37, 5)
    assert {(tuple(layer.keys.shape), tuple(layer.values.shape)) for layer in held.layers} == {
        ((3, 1, 41, 32), (3, 1, 41, 8))}
    assert storage_bytes(held) == tiny_report("deepseek", "sdpa", cache, 3, 37, 5)["cache_decode"]


class Record(__import__("torch.utils._python_dispatch", fromlist=["TorchDispatchMode"]).TorchDispatchMode):
    """Every op's output (name, shape, dtype)."""

    def __init__(self):
        super().__init__()
        self.outputs = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self.outputs.append((func.overloadpacket.__name__, tuple(out.shape), out.dtype))
        return out


def test_latent_expansion_is_what_expand_kv_allocates():
    """The last decode step of the small DeepSeek-V2 (3 x 37 prompt tokens, 5 new: 41 cached): kv_b_proj's output
    (123 tokens x 4 heads x (16 + 16)) and the new key tensor (3, 4, 41, 16 + 8), both bf16 (expand_kv,
    modeling_deepseek_v2.py lines 348-364)."""
    record = Record()
    generate_tiny("deepseek", "sdpa", "dynamic", 3, 37, 5, record)
    assert ("mm", (123, 128), torch.bfloat16) in record.outputs
    assert ("new_empty", (3, 4, 41, 24), torch.bfloat16) in record.outputs
    assert tiny_report("deepseek", "sdpa", "dynamic", 3, 37, 5)["decode_expansion"] == (123 * 128 + 3 * 4 * 41 * 24) * 2


@pytest.mark.parametrize("kind, cache, prompt, keys", [
    ("gemma2", "dynamic", 37, 37), ("gemma2", "static", 10, 12), ("mistral", "static", 10, 12),
    ("mistral", "static", 37, 37), ("mistral", "dynamic", 37, 37)])
def test_eager_scores_of_sliding_layers_span_the_keys_transformers_returns(kind, cache, prompt, keys):
    """Eager softmax over (batch, heads, prompt, keys): a dynamic sliding layer returns the whole prompt; a static
    one the prompt when it overflows the window (cache_utils.py lines 578-581, 608) and its min(16, 12) slots
    otherwise (line 602); Gemma 2's full static layers return all 12 of theirs."""
    record = Record()
    generate_tiny(kind, "eager", cache, 3, prompt, 3, record)
    widest = max(o[1][-1] for o in record.outputs if o[0] == "_softmax" and o[1][2] == prompt)
    assert widest == keys == tiny_report(kind, "eager", cache, 3, prompt, 3)["prefill_keys"]


# GPT-2's 1,024 learned positions (huggingface.co/openai-community/gpt2 config.json n_positions; wpe has that many
# rows). generate feeds the prompt and every new token but the last through the model (the cache ends at prompt +
# max_new_tokens - 1 tokens, above), each looked up in wpe (models/gpt2/modeling_gpt2.py GPT2Model.forward:
# position_ids = arange(...) + past_seen_tokens, self.wpe(position_ids)): past the rows is an IndexError, the rule
# training's seq_len and a served context are held to (builder.model.serving.past_learned_positions).
@pytest.mark.parametrize("prompt, new, refused", [(1000, 100, True), (900, 124, False), (900, 125, False),
                                                  (900, 126, True), (1024, 1, False)])
def test_gpt2_generate_past_its_learned_positions_is_refused(capsys, prompt, new, refused):
    """1,000 + 100 - 1 = 1,099 positions are refused, 900 + 124 - 1 = 1,023 and 900 + 125 - 1 = 1,024 are not, one
    more is; the command line names --max-new-tokens (the prompt's --context also moves it), in the training check's
    words."""
    values = hf_report(Config(model=MODELS["gpt2"], mode="serve", context=prompt), max_new_tokens=new).values
    assert values["final_tokens"] == prompt + new - 1
    assert bool(values["too_long"]) == refused and bool(values["fits"]) != refused
    code, _, err = run_cli(capsys, "--model", "gpt2", "--context", str(prompt), "--max-new-tokens", str(new))
    if refused:
        assert code == 2 and err.strip() == (
            "python -m builder estimate: error: argument --max-new-tokens: the engine would refuse this run "
            "(--context also moves it): generate: gpt2 has 1024 learned positions (the rows of its position "
            f"embedding table), so a sequence of {prompt + new - 1} tokens (prompt + max_new_tokens - 1: the last new "
            "token is never fed back) would index past them; at most 1024")
    else:
        assert code == 0 and err == ""


def test_gpt2_default_new_tokens_stop_at_its_learned_positions():
    """Without max_new_tokens, generate adds 20 tokens but caps max_length at config.max_position_embeddings (GPT-2's
    n_positions; generation/utils.py _prepare_generated_length), so a 1,020-token prompt gets 4 and fits; a
    1,024-token one is refused by generate itself (_validate_generated_length: input length >= max_length)."""
    gpt2 = Config(model=MODELS["gpt2"], mode="serve")
    assert hf_report(gpt2.with_changes(context=1000)).values["max_new_tokens"] == 20
    near = hf_report(gpt2.with_changes(context=1020)).values
    assert near["max_new_tokens"] == 4 and near["final_tokens"] == 1023 and near["fits"]
    with pytest.raises(ValueError, match="^context: a prompt of 1024 tokens fills gpt2's 1024 learned positions"):
        hf_report(gpt2.with_changes(context=1024))


def test_the_largest_max_new_tokens_for_gpt2_is_its_positions_not_the_memory(capsys):
    """--max max-new-tokens on a 900-token prompt: 125 (900 + 125 - 1 = 1,024 positions), said to be the model's
    limit; a model without learned positions is not capped by them."""
    code, out, _ = run_cli(capsys, "--model", "gpt2", "--context", "900", "--max", "max-new-tokens")
    assert code == 0 and out.rstrip().endswith(
        "The largest max_new_tokens for which generate on 1 prompts of 900 tokens peaks within the GPU on H100 SXM "
        "80GB: 125 (the model's own limit: the engine refuses a longer one)")
    code, out, _ = run_cli(capsys, "--model", "llama-3-8b", "--context", "900", "--max", "max-new-tokens")
    assert code == 0 and "own limit" not in out

    # A prompt that fills the 1,024 positions: generate refuses its default 20 new tokens (checked), but the question
    # varies max_new_tokens, so it answers 1 (1,024 + 1 - 1 positions), not the default's refusal.
    code, out, _ = run_cli(capsys, "--model", "gpt2", "--context", "1024", "--max", "max-new-tokens")
    assert code == 0 and out.rstrip().endswith(
        "prompts of 1,024 tokens peaks within the GPU on H100 SXM 80GB: 1 (the model's own limit: the engine refuses "
        "a longer one)")
    code, _, err = run_cli(capsys, "--model", "gpt2", "--context", "1024")
    assert code == 2 and "where generate's default max_length stops" in err


def tiny_gpt2():
    """A GPT-2 of 8 learned positions (wpe has 8 rows), without an end-of-text token to stop early."""
    from transformers import GPT2Config
    return GPT2Config(n_positions=8, n_embd=16, n_layer=1, n_head=2, vocab_size=50, bos_token_id=None,
                      eos_token_id=None)


@pytest.mark.parametrize("prompt, new", [(5, 3), (5, 4), (5, 5), (7, None), (8, None)])
def test_generate_on_a_gpt2_of_8_positions_fails_where_the_rule_refuses(prompt, new):
    """transformers 5.23.0 on CPU: 5 + 4 new tokens runs (8 fed back), 5 + 5 raises IndexError in wpe's lookup, as the
    rule says; with no max_new_tokens, 7 gets 1 new token and 8 is refused by generate (max_length capped at the
    positions)."""
    from transformers import GPT2LMHeadModel
    from builder.model.architecture import from_hf_config
    torch.manual_seed(0)
    model = GPT2LMHeadModel(tiny_gpt2()).eval()
    config = Config(model=from_hf_config(tiny_gpt2().to_dict()), mode="serve", context=prompt)
    try:
        values = hf_report(config, max_new_tokens=new).values
        predicted = None if values["fits"] else IndexError
    except ValueError:
        predicted = ValueError
    kwargs = {"max_new_tokens": new, "min_new_tokens": new} if new else {}
    try:
        with torch.no_grad():
            out = model.generate(torch.randint(3, 50, (1, prompt)), do_sample=False, pad_token_id=0, **kwargs)
        happened = None
        assert out.shape[1] == min(prompt + (new or 20), 8 if new is None else prompt + new)
        assert values["max_new_tokens"] == out.shape[1] - prompt
    except (IndexError, ValueError) as error:
        happened = type(error)
    assert happened == predicted
