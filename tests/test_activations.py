"""Op-level activation accounting against Korthikanti et al. 2022 (arXiv:2205.05198) Table 2,
and the pitfalls listed in ../shared/REFERENCES.md."""

from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.model import Architecture, Config, estimate
from builder.model.activations import korthikanti_per_layer

MODELS = default_models()
LAYER_GROUPS = ("norms", "attention", "attention_scores", "mlp", "dropout", "checkpoint")

# A GPT-3 175B block (Brown et al. 2020, Table 2.1: h=12288, a=96, L=96), GeLU 4h MLP,
# LayerNorm, dropout: the block Korthikanti et al. analyse.
GPT3 = Architecture(name="gpt3-175b", family="gpt2", layers=96, hidden=12288, heads=96, vocab=51200,
                    ffn=4 * 12288, mlp="gelu", norm="layernorm", qkv_bias=True, out_bias=True, mlp_bias=True,
                    tied_embeddings=True, positions="learned", max_positions=2048, activation="gelu_fused")


def layer_bytes(config: Config) -> Fraction:
    """Per-layer activation bytes from the op-level parts of an estimate."""
    b = estimate(config)
    total = sum(b.get(f"activations/{g}") for g in LAYER_GROUPS)
    return Fraction(total, config.model.layers)


def test_table2_closed_form_hand_computed():
    # s=2048, b=1, h=12288, a=96: sbh(34 + 5as/h) = 25,165,824 x (34 + 80) bytes.
    assert korthikanti_per_layer(2048, 1, 12288, 96) == 25_165_824 * 114
    assert korthikanti_per_layer(2048, 1, 12288, 96, recompute="selective") == 25_165_824 * 34
    assert korthikanti_per_layer(2048, 1, 12288, 96, recompute="full") == 25_165_824 * 2
    assert korthikanti_per_layer(2048, 1, 12288, 96, t=8) == 25_165_824 * (10 + Fraction(24, 8) + 10)
    assert korthikanti_per_layer(2048, 1, 12288, 96, t=8, sequence_parallel=True) == 25_165_824 * (Fraction(34, 8) + 10)


@pytest.mark.parametrize("t, sp, recompute", [
    (1, False, "none"), (1, False, "selective"), (1, False, "full"),
    (2, False, "none"), (4, False, "none"), (8, False, "none"), (8, False, "selective"),
    (2, True, "none"), (8, True, "none"), (8, True, "selective"), (8, True, "full"),
])
@pytest.mark.parametrize("s, b", [(2048, 1), (1024, 4)])
def test_op_level_megatron_block_reproduces_table2(t, sp, recompute, s, b):
    config = Config(model=GPT3, micro_batch=b, seq_len=s, attention="eager", dropout=True, implementation="megatron",
                    tp=t, sequence_parallel=sp, recompute=recompute, precision="fp16-mixed")
    expected = korthikanti_per_layer(s, b, GPT3.hidden, GPT3.heads, t, sp, recompute)
    assert layer_bytes(config) == expected


def test_korthikanti_reference_mode_is_selectable_by_name():
    config = Config(model=GPT3, seq_len=2048, activation_formula="korthikanti")
    b = estimate(config)
    assert b.get("activations") == 96 * korthikanti_per_layer(2048, 1, 12288, 96)
    assert "Table 2" in b.part("activations/layers").source


def test_flash_and_sdpa_save_no_s_squared_matrix():
    # REFERENCES.md pitfall: the 5as^2b term kept when FlashAttention/SDPA is used.
    arch = MODELS["llama-3-8b"]
    eager = estimate(Config(model=arch, seq_len=8192, attention="eager"))
    flash = estimate(Config(model=arch, seq_len=8192, attention="flash"))
    assert eager.get("activations/attention_scores") > 0
    assert flash.get("activations/attention_scores") == 0
    # flash keeps an fp32 logsumexp per head and row: b x a x s x 4 bytes per layer.
    lse = 1 * 32 * 8192 * 4 * 32
    q_o = 8192 * 4096 * 2 * 2 * 32  # Q and o_proj input, bf16
    kv = 8192 * 1024 * 2 * 2 * 32  # K and V with 8 KV heads
    assert flash.get("activations/attention") == q_o + kv + lse + 8192 * 4096 * 2 * 32  # + q/k/v input


def test_eager_scores_grow_quadratically():
    arch = MODELS["gpt2"]
    small = estimate(Config(model=arch, seq_len=512, attention="eager")).get("activations/attention_scores")
    large = estimate(Config(model=arch, seq_len=1024, attention="eager")).get("activations/attention_scores")
    assert large == 4 * small


def test_logits_and_loss_dominate_for_large_vocabulary():
    # REFERENCES.md pitfall: b x s x vocab, upcast to fp32 for the loss, can exceed all layer activations.
    arch = MODELS["llama-3.2-1b"]  # V = 128256, h = 2048, 16 layers
    b = estimate(Config(model=arch, seq_len=8192, recompute="full"))
    logits_and_loss = b.get("activations/logits") + b.get("activations/loss")
    layers = sum(b.get(f"activations/{g}") for g in LAYER_GROUPS)
    assert b.get("activations/loss") == 8192 * 128256 * 4 + 8192 * 8 + 4  # fp32 log-softmax, int64 labels, weight
    assert logits_and_loss > layers


def test_swiglu_rmsnorm_layer_is_not_34_sbh():
    # REFERENCES.md pitfall: a single coefficient (34) for every architecture.
    arch = MODELS["llama-2-7b"]
    s, b, h = 4096, 1, 4096
    per_layer = layer_bytes(Config(model=arch, seq_len=s, micro_batch=b, attention="flash"))
    assert per_layer != 34 * s * b * h
    # The op list: 2 RMSNorms (fp32 input 4sbh + rsqrt 4sb + bf16 normalised 2sbh), q/k/v input 2sbh,
    # Q/K/V 6sbh, logsumexp 4asb, o_proj input 2sbh, MLP input 2sbh, 4 x 2sbf (SiLU in/out, up, product).
    f = 11008
    expected = 2 * (4 * s * b * h + 4 * s * b + 2 * s * b * h) + 2 * s * b * h + 6 * s * b * h + 4 * 32 * s * b \
        + 2 * s * b * h + 2 * s * b * h + 4 * 2 * s * b * f
    assert per_layer == expected


def test_megatron_fused_swiglu_saves_only_its_input():
    # Megatron-LM megatron/core/fusions/fused_bias_swiglu.py SwiGLUFunction.forward: ctx.save_for_backward(input), the
    # first linear's 2f-wide output; --swiglu turns it on by default (training/arguments.py: bias_activation_fusion =
    # bias_swiglu_fusion). The MLP keeps 2f (that input) + f (the second linear's input) per token, 16-bit, beside
    # the first linear's input h; transformers' LlamaMLP keeps SiLU's input, its output, the up output and the product.
    arch = MODELS["llama-3-8b"]
    tokens, h, f = 4096, arch.hidden, arch.ffn
    mlp = {impl: estimate(Config(model=arch, seq_len=4096, attention="flash", implementation=impl)).get("activations/mlp")
           for impl in ("megatron", "hf")}
    assert mlp["megatron"] == arch.layers * tokens * 2 * (h + 3 * f)
    assert mlp["hf"] == arch.layers * tokens * 2 * (h + 4 * f)


def test_full_recompute_keeps_layer_inputs_plus_one_working_layer():
    arch = MODELS["llama-3-8b"]
    b = estimate(Config(model=arch, seq_len=4096, recompute="full"))
    assert b.get("activations/checkpoint") == 32 * 4096 * 4096 * 2  # 2sbh per layer (Korthikanti 4.1)
    assert b.get("activations/recompute_working_layer") > 0
    assert b.part("activations/recompute_working_layer").simplification


def test_pipeline_first_stage_holds_p_micro_batches():
    # Korthikanti 4.2.3: the first stage holds L/p layers for p in-flight micro-batches (1F1B).
    arch = GPT3
    base = Config(model=arch, seq_len=2048, activation_formula="korthikanti", tp=8, sequence_parallel=True,
                  recompute="selective")
    single = estimate(base).get("activations")
    piped = estimate(base.with_changes(pp=8, grad_accum=64)).get("activations")
    assert piped == single  # (L/p) x p = L layers' worth
    interleaved = estimate(base.with_changes(pp=8, grad_accum=64, pp_schedule="interleaved", pp_virtual_stages=2))
    assert interleaved.get("activations") == single * (1 + Fraction(7, 16))


def test_context_parallel_splits_tokens():
    arch = MODELS["llama-3-8b"]
    one = estimate(Config(model=arch, seq_len=16384, attention="flash", recompute="full"))
    four = estimate(Config(model=arch, seq_len=16384, attention="flash", recompute="full", cp=4))
    assert four.get("activations/checkpoint") * 4 == one.get("activations/checkpoint")


def test_lora_drops_weight_gradient_saves_and_adds_adapter_saves():
    # A frozen linear layer needs its input only for its weight gradient, so it keeps none;
    # PEFT casts each adapted projection's input to the fp32 adapter dtype (saved by lora_A)
    # and lora_B keeps lora_A's output (T x r, fp32).
    arch = MODELS["llama-2-7b"]
    s, h, f, r = 4096, 4096, 11008, 16
    full = layer_bytes(Config(model=arch, seq_len=s, attention="flash"))
    lora = estimate(Config(model=arch, seq_len=s, attention="flash", lora_rank=r, lora_targets=("q", "v")))
    per_layer = Fraction(sum(lora.get(f"activations/{g}") for g in LAYER_GROUPS + ("lora",)), arch.layers)
    # q/k/v and gate/up inputs; down input; 2 norms. The o_proj input stays: the fused attention kernel saves its
    # output for its own backward (measured with PEFT 0.21.2: tests/test_lora_peft.py).
    dropped = 2 * s * h * 2 + 2 * s * f + 2 * (2 * s * h)
    added = 2 * (4 * s * h + 4 * s * r)  # q and v adapters
    assert per_layer == full - dropped + added
    assert lora.get("activations/lora") == arch.layers * added
    # The frozen output layer and final norm weight need no inputs for weight gradients either:
    # only the final RMSNorm's fp32 input and rsqrt stay.
    assert lora.get("activations/final_norm") == 4 * s * h + 4 * s


def _moe_parts(arch, **knobs):
    b = estimate(Config(model=arch, seq_len=4096, attention="flash", **knobs))
    return {g: b.get(f"activations/{g}") / arch.layers for g in ("mlp", "router")}


def test_megatron_moe_counts_top_k_routed_tokens_and_the_router():
    # Megatron-LM's MoE layer at commit d98e8a6, its defaults (oplists.MEGATRON_MOE_BLOCK): per token and layer, bf16,
    # Mixtral 8x7B (h 4096, expert f 14336, E 8, K 2), tp = ep = 1, 4096 tokens.
    # mlp: the router's saved input h (moe_utils.py RouterGatingLinearFunction: save_for_backward(inp, ...)), the
    #   permuted copies K x h (experts.py SequentialMLP -> mlp.py MLP linear_fc1 input), the weighted fused SwiGLU's
    #   input K x 2f and routing weight K (fused_bias_swiglu.py WeightedSwiGLUFunction: save_for_backward(input,
    #   weights)), the second linear's input K x f: 2 x (4096 + 8192 + 57344 + 2 + 28672) = 196,612 B (192.0 KiB).
    # router: top-k indices 8K, top-k softmax 4K (moe_utils.py topk_routing_with_score_function), aux-loss softmax 4E
    #   (compute_routing_scores_for_aux_loss), masked_select's routing weights 2E and bool map E
    #   (token_dispatcher.py MoEAllGatherTokenDispatcher.dispatch_postprocess), permute's int64 indices 8K: 96 B.
    # The dense Megatron block gave 92 KiB (one expert's MLP, no router): an understatement by 100 KiB per token-layer.
    arch = MODELS["mixtral-8x7b"]
    tokens, h, f, E, K = 4096, arch.hidden, arch.n_expert_ffn, arch.experts, arch.top_k
    assert (h, f, E, K) == (4096, 14336, 8, 2)
    megatron = _moe_parts(arch, implementation="megatron")
    assert megatron["mlp"] == tokens * 2 * (h + K * h + 3 * K * f + K) == tokens * 196_612
    assert megatron["router"] == tokens * (8 * K + 4 * K + 4 * E + 2 * E + E + 8 * K) == tokens * 96
    # tp 2 with sequence parallelism, ep 2: the router reads T/t tokens; the dispatcher gathers T x ep over tp x ep and
    # keeps E/ep experts' columns (T x E entries), T x K routed tokens on average; the expert width divides by tp.
    split = _moe_parts(arch, implementation="megatron", tp=2, sequence_parallel=True, ep=2, dp=2)
    assert split["mlp"] == tokens * 2 * (h / 2 + K * h + 3 * K * f / 2 + K) == tokens * 104 * 1024 + tokens * 4
    assert split["router"] == tokens * ((8 * K + 4 * K + 4 * E) / 2 + 2 * E + E + 8 * K) == tokens * 68
    # The transformers and torchtune op lists (oplists._HF_MOE, transformers 5.23 MixtralSparseMoeBlock with the
    # grouped_mm experts; measured byte for byte on CPU, content/validation/moe.json). Per token and layer, bf16:
    # mlp: the norm output h, the sorted expert inputs K x h, the first grouped matmul's 2f-wide output, SiLU's output
    #   and the product (4 x K x f), the experts' outputs K x h (2 B each), the sorted fp32 routing weights 4K:
    #   270,344 B; router: fp32 softmax 4E, int64 top-k indices 8K, the renormalising division's fp32 copy 4K and sum
    #   4, three int64 gather indices 3 x 8K: 108 B, and once per layer the int32 offsets of the E experts (4E B).
    assert 2 * (h + K * h + 4 * K * f + K * h) + 4 * K == 270_344 and 4 * E + 8 * K + 4 * K + 4 + 3 * 8 * K == 108
    for impl in ("hf", "torchtune"):  # bf16 throughout: torchtune trains in one dtype (builder.model.checks)
        assert _moe_parts(arch, implementation=impl, precision="bf16") == {"mlp": tokens * 270_344,
                                                                           "router": tokens * 108 + 4 * E}


def test_megatron_moe_shared_experts_and_tp_without_sp():
    # DeepSeek-V2-Lite: 2 shared experts of 1408 (shared_experts.py SharedExpertMLP, one MLP of 2816, fused SwiGLU:
    # 2 x 2816 + 2816 saved per token beside the routed experts' rows).
    arch = MODELS["deepseek-v2-lite"]
    tokens, h, f, K, g = 4096, arch.hidden, arch.n_expert_ffn, arch.top_k, arch.shared_experts * arch.n_expert_ffn
    megatron = _moe_parts(arch, implementation="megatron")
    assert megatron["mlp"] == tokens * 2 * (h + K * h + 3 * K * f + K + 3 * g)
    # moe_layer.py MoELayer.forward: training over tp > 1 ranks without sequence parallelism raises.
    with pytest.raises(ValueError, match="sequence parallelism"):
        estimate(Config(model=MODELS["mixtral-8x7b"], implementation="megatron", tp=2, seq_len=4096))
