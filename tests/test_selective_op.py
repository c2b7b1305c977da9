"""torchtitan's per-op selective activation checkpointing (--recompute selective-op; builder.model.oplists.
TORCHTITAN_OP_SAC, builder.model.activations' 'activations/op_outputs').

The rule, from torchtitan/distributed/activation_checkpoint.py at commit b5bcd76 (SelectiveAC._wrap_block and its
_get_custom_policy): every transformer block is wrapped in ptd_checkpoint_wrapper (which keeps the block's input) with
create_selective_checkpoint_contexts(policy); the policy, its counter fresh for each call of the block, MUST_SAVEs the
outputs of the ops of _get_default_save_ops() (compute_intensive_ops: aten.mm, addmm, bmm, the SDPA flash and
efficient kernels, ...; aten.linear, flex_attention, reduce_scatter_tensor, ...) except every second mm (the count is
incremented before `% 2 == 0` is tested: the 1st, 3rd, 5th and 7th are saved), and recomputes the rest. A Llama block
runs its matmuls in the order q, k, v, (attention), o, gate, up, down (transformers' LlamaAttention and LlamaMLP, and
torchtitan's Attention wq, wk, wv, wo and FeedForward w2(F.silu(w1(x)) * w3(x))), so it keeps q, v, gate and down's
outputs, and the attention kernel's output and logsumexp.
"""

from __future__ import annotations

import pytest

from builder.catalog import default_models
from builder.model import Config
from builder.model.activations import LAYER_GROUPS
from builder.model.config import RECOMPUTE, validate_config
from builder.model.peak import assess
from tests.test_cli import run
from tests.test_options import estimate_actions

MODELS = default_models()
LLAMA = MODELS["llama-3.1-8b"]
# The setting of torchtitan's benchmark Table 1 (benchmarks/llama3_h100_202412_torchtitan.md): Llama 3.1 8B, FSDP over
# 8 GPUs, local batch 2, sequence 8,192, selective (op) activation checkpointing, bf16 mixed precision.
TABLE_1 = Config(model=LLAMA, dp=8, fsdp="FULL_SHARD", micro_batch=2, seq_len=8192, attention="sdpa",
                 precision="bf16-mixed", recompute="selective-op")


def parts(config: Config) -> dict[str, int]:
    breakdown, _ = assess(config)
    return {p.name: p.bytes for p in breakdown.parts}


def kept_per_layer(config: Config) -> int:
    """The bytes one layer keeps across the step: its saved groups, its checkpoint and its kept op outputs."""
    names = {f"activations/{g}" for g in LAYER_GROUPS} | {"activations/checkpoint", "activations/op_outputs"}
    kept = sum(b for name, b in parts(config).items() if name in names)
    assert kept % config.model.layers == 0
    return kept // config.model.layers


def test_llama_3_1_8b_keeps_what_torchtitans_policy_saves():
    """Llama 3.1 8B (h 4096, 32 query heads and 8 KV heads of d 128, SwiGLU width f 14,336) at 2 x 8,192 tokens,
    T = 16,384 tokens, bf16 (2 bytes), SDPA's flash kernel (aten), one GPU's layer under torchtitan's per-op policy:

      block input (kept by the checkpoint wrapper)   T x h x 2       = 16,384 x 4,096 x 2   = 134,217,728
      q_proj output (1st mm, saved)                  T x 32 x 128 x 2                        = 134,217,728
      v_proj output (3rd mm, saved)                  T x 8 x 128 x 2                         =  33,554,432
      attention output (flash kernel, saved)         T x 32 x 128 x 2                        = 134,217,728
      logsumexp (flash kernel, fp32)                 2 x 32 x 8,192 x 4                      =   2,097,152
      gate_proj output (5th mm, saved)               T x 14,336 x 2                          = 469,762,048
      down_proj output (7th mm, saved)               T x 4,096 x 2                           = 134,217,728
      k (2nd), o (4th), up (6th) recomputed                                                          0
                                                                                     total = 1,042,284,544

    that is 63,616 bytes a token (0.97 GiB a layer)."""
    by_hand = 134_217_728 * 4 + 33_554_432 + 2_097_152 + 469_762_048
    assert by_hand == 1_042_284_544 == 63_616 * 16_384
    assert kept_per_layer(TABLE_1) == by_hand
    got = parts(TABLE_1)
    assert got["activations/checkpoint"] == 32 * 134_217_728
    assert got["activations/op_outputs"] == 32 * (by_hand - 134_217_728)
    # Every layer is checkpointed: no layer keeps the tensors its ops save for autograd.
    assert not any(got.get(f"activations/{g}", 0) for g in LAYER_GROUPS)


def test_it_lies_strictly_between_full_and_none():
    full = kept_per_layer(TABLE_1.with_changes(recompute="full"))
    none = kept_per_layer(TABLE_1.with_changes(recompute="none"))
    op = kept_per_layer(TABLE_1)
    assert full == 134_217_728 < op < none
    needs = {mode: assess(TABLE_1.with_changes(recompute=mode))[1].bytes for mode in ("none", "full", "selective-op")}
    assert needs["full"] < needs["selective-op"] < needs["none"]


def test_the_recomputed_layer_reuses_its_kept_outputs():
    # During a layer's backward its recomputation takes the kept outputs from the cache: the working layer is the
    # layer's saved tensors (full recomputation's working layer) less the layer's kept op outputs.
    op, full = parts(TABLE_1), parts(TABLE_1.with_changes(recompute="full"))
    assert op["activations/recompute_working_layer"] == (full["activations/recompute_working_layer"]
                                                         - op["activations/op_outputs"] // 32)


def test_tensor_parallel_ranks_keep_their_share_and_downs_partial_sum():
    """tp 2: q, v, the attention output and logsumexp and gate are split over the ranks (column parallel, heads
    split); down is row parallel, so its output on each rank is the partial sum, T x h in full. Bytes: per token
    (4,096/2 + 1,024/2 + 4,096/2 + 14,336/2 + 4,096) x 2, and the logsumexp 2 x 16 heads x 8,192 x 4. With sequence
    parallelism the layer's input is split (T/2 x h) and the reduce-scatter outputs of o and down, T/2 x h each, are
    saved too (comm ops of the policy's list)."""
    t = 16_384
    ops = (2048 + 512 + 2048 + 7168 + 4096) * 2 * t + 2 * 16 * 8192 * 4
    plain = parts(TABLE_1.with_changes(tp=2, dp=4))
    assert plain["activations/op_outputs"] == 32 * ops
    assert plain["activations/checkpoint"] == 32 * t * 4096 * 2
    sp = parts(TABLE_1.with_changes(tp=2, dp=4, sequence_parallel=True))
    assert sp["activations/op_outputs"] == 32 * (ops + 2 * (t // 2) * 4096 * 2)
    assert sp["activations/checkpoint"] == 32 * (t // 2) * 4096 * 2


@pytest.mark.parametrize("model, why", [
    ("mixtral-8x7b", "recompute: selective-op is modelled for dense models; mixtral-8x7b is a mixture-of-experts model "
                     "(torchtitan saves its router's top-k and all-to-all outputs and force-recomputes the router "
                     "gate's matmuls, not modelled)"),
    ("qwen3-30b-a3b", "recompute: selective-op is modelled for dense models; qwen3-30b-a3b is a mixture-of-experts "
                      "model (torchtitan saves its router's top-k and all-to-all outputs and force-recomputes the "
                      "router gate's matmuls, not modelled)"),
    ("qwen2.5-7b", "recompute: selective-op is modelled for bias-free projections; qwen2.5-7b's biases make addmm "
                   "ops, which the policy saves without counting them as matmuls"),
])
def test_what_is_not_modelled_is_refused_in_one_line(model, why):
    with pytest.raises(ValueError) as error:
        validate_config(Config(model=MODELS[model], recompute="selective-op"))
    assert str(error.value) == why


def test_other_refusals_name_the_option():
    for changes in ({"attention": "eager"}, {"attention": "flash"}, {"compile": True}, {"lora_rank": 16}, {"cp": 2},
                    {"implementation": "megatron"}, {"activation_formula": "korthikanti"}):
        with pytest.raises(ValueError, match=r"^recompute: selective-op "):
            validate_config(TABLE_1.with_changes(**changes))
    validate_config(TABLE_1)
    validate_config(TABLE_1.with_changes(model=MODELS["qwen3-8b"]))  # Qwen3's q/k norms do not change the matmuls


def test_the_command_line_offers_it(capsys):
    assert RECOMPUTE == ("none", "selective", "full", "selective-op")
    action = estimate_actions()["--recompute"]
    assert tuple(action.choices) == RECOMPUTE
    assert "torchtitan's per-op selective activation checkpointing" in action.help
    code, out, _ = run(capsys, "estimate", "--model", "llama-3.1-8b", "--dp", "8", "--fsdp", "FULL_SHARD",
                       "--micro-batch", "2", "--seq-len", "8192", "--recompute", "selective-op", "--attention", "sdpa")
    assert code == 0 and "activations/op_outputs" in out
    code, _, err = run(capsys, "estimate", "--model", "mixtral-8x7b", "--recompute", "selective-op")
    assert code != 0 and "selective-op is modelled for dense models" in err


def test_the_calculator_form_offers_it():
    from builder.widgets import calculator as calc
    from tests.test_widgets_calculator import GPUS, state

    controls = [c for group in calc.form_groups(GPUS, MODELS) for _, _, cs in [group] for c in cs]
    recompute = next(c for c in controls if c.key == "recompute")
    assert ("selective-op", "selective per-op (torchtitan)") in recompute.choices
    assert [value for value, _ in recompute.choices] == list(RECOMPUTE)
    result = calc.results(state(model="llama-3.1-8b", recompute="selective-op", seq_len="8192", micro_batch="2",
                                attention="sdpa"), MODELS, GPUS, [])
    assert not result["error"]
    refused = calc.results(state(model="mixtral-8x7b", recompute="selective-op"), MODELS, GPUS, [])
    assert refused["error"].startswith("recompute: selective-op is modelled for dense models")


def test_measured_a_small_llama_layer_under_torchtitans_policy():
    """Measured on CPU with PyTorch: transformers' LlamaDecoderLayer (bf16, SDPA, 4 query and 2 KV heads of 16, hidden
    64, SwiGLU width 176, 2 x 32 tokens) under torch.utils.checkpoint with create_selective_checkpoint_contexts and a
    copy of torchtitan's policy (SelectiveAC._wrap_block at b5bcd76, save set _get_default_save_ops). What the layer
    keeps is read from the checkpoint's cache (the caching mode's storage): every entry the policy saved, by storage.

    One stand-in: on CPU, SDPA runs aten._scaled_dot_product_flash_attention_for_cpu, which is not in
    get_default_op_list().compute_intensive_ops (the CUDA flash and efficient kernels are); it is added to the copied
    save set so that the CPU kernel plays the CUDA kernel's part (same outputs: the attention output and an fp32
    logsumexp per head and row)."""
    torch = pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig
    from torch._functorch.partitioners import get_default_op_list
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
    import torch.utils.checkpoint as torch_checkpoint
    from builder.model.architecture import Architecture

    b, s, h, heads, kv, d, f = 2, 32, 64, 4, 2, 16, 176
    config = LlamaConfig(hidden_size=h, num_attention_heads=heads, num_key_value_heads=kv, head_dim=d,
                         intermediate_size=f, num_hidden_layers=1, vocab_size=32, max_position_embeddings=64,
                         attn_implementation="sdpa")
    torch.manual_seed(0)
    layer = llama.LlamaDecoderLayer(config, 0).to(torch.bfloat16)
    x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    positions = torch.arange(s).unsqueeze(0).expand(b, -1)
    cos, sin = llama.LlamaRotaryEmbedding(config)(x, positions)

    # torchtitan's save set and policy, copied (the ops absent from this PyTorch are skipped, as _resolve_ops does).
    save_ops = {op.default for op in get_default_op_list().compute_intensive_ops}
    save_ops |= {torch.ops.aten.linear.default, torch.ops.aten.max.default, torch.ops.aten.topk.default,
                 torch.ops._c10d_functional.reduce_scatter_tensor.default,
                 torch.ops._c10d_functional.all_to_all_single.default}
    save_ops.add(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default)  # the CPU stand-in (docstring)
    mm_ops = (torch.ops.aten.mm.default, torch.ops.aten.linear.default)

    def custom_policy():
        meta = {"forward_mm_count": 0, "recompute_mm_count": 0}

        def wrapped_policy(ctx, func, *args, **kwargs):
            mode = "recompute" if ctx.is_recompute else "forward"
            mm_count_key = f"{mode}_mm_count"
            if func in mm_ops:
                meta[mm_count_key] += 1
            if func in save_ops:
                if func in mm_ops and meta[mm_count_key] % 2 == 0:
                    return CheckpointPolicy.PREFER_RECOMPUTE
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        return wrapped_policy

    contexts = []

    def context_fn():
        contexts.append(create_selective_checkpoint_contexts(custom_policy()))
        return contexts[-1]

    out = checkpoint(layer, x, position_embeddings=(cos, sin), position_ids=positions, use_reentrant=False,
                     context_fn=context_fn)
    out = out[0] if isinstance(out, tuple) else out
    (caching, _), = contexts
    kept: dict[int, int] = {}
    saved_ops = []
    for key, entries in caching.storage.items():
        for entry in entries.values():
            if entry is torch_checkpoint._RECOMPUTE:
                continue
            saved_ops.append(str(key[0] if isinstance(key, tuple) else key))
            leaves = entry if isinstance(entry, (tuple, list)) else (entry,)
            for leaf in leaves:
                value = getattr(leaf, "val", leaf)
                if isinstance(value, torch.Tensor):
                    storage = value.untyped_storage()
                    kept[storage.data_ptr()] = storage.nbytes()
    assert sorted(saved_ops) == sorted(["aten.mm.default"] * 4
                                       + ["aten._scaled_dot_product_flash_attention_for_cpu.default"])
    t = b * s
    assert sum(kept.values()) == (t * heads * d * 2 + t * kv * d * 2 + t * heads * d * 2 + b * heads * s * 4
                                  + t * f * 2 + t * h * 2)

    # The model's rows for the same layer (one GPU, the checkpoint's input apart).
    arch = Architecture(name="tiny-llama", family="llama", layers=1, hidden=h, heads=heads, kv_heads=kv, head_dim=d,
                        vocab=32, ffn=f, mlp="swiglu", norm="rmsnorm", max_positions=64)
    got = parts(Config(model=arch, micro_batch=b, seq_len=s, attention="sdpa", precision="bf16-mixed",
                       recompute="selective-op"))
    assert got["activations/op_outputs"] == sum(kept.values())
    assert got["activations/checkpoint"] == x.numel() * 2
    out.float().sum().backward()  # the recomputation takes every kept output back: the policy's counts agree
    assert x.grad is not None
