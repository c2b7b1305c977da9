"""Model states under optimizers, sharding, parallelism, offload, LoRA/QLoRA and serving."""

from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.model import Config, estimate, param_count
from builder.model.peak import need, phases
from builder.model.questions import Fit, fits, max_micro_batch, max_seq_len, min_gpus

MODELS = default_models()
N = 7_000_000_000


@pytest.mark.parametrize("optimizer, state_bytes", [
    ("adamw", 8), ("adam", 8), ("sgd-momentum", 4), ("lion", 4), ("sgd", 0),
])
def test_optimizer_state_bytes(optimizer, state_bytes):
    # Transformer Math 101: AdamW 12 B/param (with master), SGD with momentum 8 (with master).
    b = estimate(Config(params=N, optimizer=optimizer))
    assert b.get("optimizer") - b.get("optimizer/master") == N * state_bytes
    assert b.get("optimizer/master") == N * 4


def test_8bit_adam_is_about_6_bytes_with_master():
    # Transformer Math 101: 8-bit AdamW 6 B/param = 4 (master) + 2 (m, v); plus bitsandbytes' fp32 absmax
    # per 256-element block (optimizer.py: blocks = n // 256).
    b = estimate(Config(params=N, optimizer="adam8bit"))
    assert b.get("optimizer") == N * 4 + 2 * (N + N * 4 // 256)


def test_adafactor_state_is_factored():
    arch = MODELS["llama-2-7b"]
    b = estimate(Config(model=arch, optimizer="adafactor", precision="bf16"))
    state = b.get("optimizer/adafactor_factors")
    assert 0 < state < param_count(arch) * 2 // 1000  # rows + columns: far under 0.1% of parameters


@pytest.mark.parametrize("stage, expected", [
    # ZeRO paper section 5: Pos (2+2)Ψ + KΨ/Nd; Pos+g 2Ψ + (2+K)Ψ/Nd; Pos+g+p (4+K)Ψ/Nd, K = 12.
    (0, 16 * N), (1, 4 * N + 12 * N // 64), (2, 2 * N + 14 * N // 64), (3, 16 * N // 64),
])
def test_zero_stages_match_the_paper(stage, expected):
    b = estimate(Config(params=N, zero=stage, dp=64))
    assert model_states(b) == expected


def model_states(b) -> int:
    """The ZeRO paper's model states (section 3.1): the total less data parallelism's gradient buckets, which its
    section 3.2 counts among the residual states (temporary buffers for the gradient all-reduce). With zero 0 and
    dp > 1 the model assumes PyTorch DDP, whose reducer keeps those buckets (builder.model.gradbuffers)."""
    return b.total - b.get("comm/ddp_buckets")


def test_zero_paper_example_7_5b_on_64_gpus():
    # ZeRO paper Figure 1: Ψ = 7.5B, Nd = 64, K = 12: baseline 120 GB, Pos 31.4 GB, Pos+g 16.6 GB, Pos+g+p 1.9 GB.
    psi = 7_500_000_000
    totals = [model_states(estimate(Config(params=psi, zero=z, dp=64))) / 1e9 for z in range(4)]
    assert [round(t, 1) for t in totals] == [120.0, 31.4, 16.6, 1.9]


def test_fsdp_strategies_map_onto_zero_stages():
    arch = MODELS["llama-2-7b"]
    shard = param_count(arch) // 8  # every Llama 2 7B tensor's dim 0 divides by 8: FSDP's chunks are even
    full = estimate(Config(model=arch, fsdp="FULL_SHARD", dp=8))
    zero3 = estimate(Config(model=arch, zero=3, dp=8))
    states = lambda b: {k: v for k, v in b.as_dict().items()  # noqa: E731
                        if k.split("/")[0] in ("weights", "optimizer", "gradients")}
    # Under bf16-mixed they differ: PyTorch FSDP keeps one sharded parameter in its declared dtype (fp32), which the
    # optimizer steps, and casts the reduced gradients to it (torch 2.13 _fsdp_param.py FSDPParam._init_sharded_param,
    # _fsdp_collectives.py foreach_reduce); DeepSpeed ZeRO-3 keeps bf16 parameters and gradients beside an fp32 master.
    assert states(full) == {"weights": 4 * shard, "gradients": 4 * shard, "optimizer/adam_m": 4 * shard,
                            "optimizer/adam_v": 4 * shard}
    assert states(zero3) == {"weights": 2 * shard, "optimizer/master": 4 * shard, "gradients": 2 * shard,
                             "optimizer/adam_m": 4 * shard, "optimizer/adam_v": 4 * shard}
    # Without mixed precision there is no master to tell them apart: the same model states; the communication buffers
    # differ (DeepSpeed's coordinator, builder.model.zero3, and its reduce bucket, builder.model.buckets).
    for precision in ("fp32", "bf16"):
        assert (states(estimate(Config(model=arch, fsdp="FULL_SHARD", dp=8, precision=precision)))
                == states(estimate(Config(model=arch, zero=3, dp=8, precision=precision))))
    grad_op = estimate(Config(model=arch, fsdp="SHARD_GRAD_OP", dp=8))
    assert grad_op.get("weights") == 2 * param_count(arch)  # the 16-bit copies held from forward to backward, whole
    assert grad_op.get("optimizer/master") == 4 * shard  # the fp32 sharded flat parameter the optimizer steps
    assert grad_op.get("gradients") == 4 * shard  # cast to the flat parameter's dtype (_cast_grad_to_param_dtype)
    no_shard = estimate(Config(model=arch, fsdp="NO_SHARD", dp=8))
    # NO_SHARD: the whole fp32 parameters, stepped in place (no master), fp32 gradients, Adam's 8 B.
    assert no_shard.get("weights") == no_shard.get("gradients") == 4 * param_count(arch)
    assert no_shard.get("optimizer") == 8 * param_count(arch)
    hybrid = estimate(Config(model=arch, fsdp="HYBRID_SHARD", dp=32, fsdp_shard_group=8))
    assert hybrid.part("optimizer/adam_m").sharded_by == 8
    assert hybrid.get("comm/gathered_params") > 0


def test_fsdp_mixed_precision_holds_one_fp32_shard_at_backward_start():
    # PyTorch 2.13 FSDP2 (_fsdp_param.py FSDPParam._init_sharded_param: _sharded_param_data in the parameter's own
    # dtype; all_gather_inputs casts it to param_dtype for the all-gather) and FSDP1 (_flat_param.py FlatParamHandle:
    # the flat parameter keeps its dtype, _mp_shard is freed after the all-gather): under bf16-mixed each rank keeps
    # one fp32 shard, which the optimizer steps. At the start of backward no gradient exists yet: 4 B + Adam's 8 B per
    # parameter per shard, where DeepSpeed ZeRO-3 holds 2 B (bf16) + 4 B (fp32 master) + 8 B and its 2 B of bf16
    # gradient partitions, allocated with the optimizer and kept (DeepSpeed edaa722 stage3.py:742-751).
    arch = MODELS["llama-2-7b"]
    shard = param_count(arch) // 8

    def states_at_backward_start(config: Config) -> int:
        moment = next(p for p in phases(config) if p.name == "backward_start")
        return sum(p.bytes for p in moment.parts if p.name.split("/")[0] in ("weights", "optimizer", "gradients"))

    fsdp = states_at_backward_start(Config(model=arch, fsdp="FULL_SHARD", dp=8))
    zero3 = states_at_backward_start(Config(model=arch, zero=3, dp=8))
    assert fsdp == 12 * shard
    assert zero3 == 16 * shard
    assert zero3 - fsdp == 4 * shard


def test_tensor_and_pipeline_parallel_divide_states():
    # REFERENCES.md pitfall: gradients and optimizer states not divided by TP/PP degree.
    arch = MODELS["llama-3-70b"]
    one = estimate(Config(model=arch))
    tp8 = estimate(Config(model=arch, tp=8))
    ratio = Fraction(tp8.get("optimizer/adam_m"), one.get("optimizer/adam_m"))
    assert Fraction(1, 8) < ratio < Fraction(1, 8) * Fraction(101, 100)  # norms are replicated
    pp4 = estimate(Config(model=arch, pp=4, grad_accum=8))
    assert pp4.get("gradients") < one.get("gradients") / 3
    assert any("pipeline stage reported" in note for note in pp4.notes)


def test_expert_parallel_divides_expert_weights():
    arch = MODELS["mixtral-8x7b"]
    ep1 = estimate(Config(model=arch, dp=8))
    ep8 = estimate(Config(model=arch, dp=8, ep=8))
    experts = 32 * 8 * 3 * 4096 * 14336
    assert ep1.get("weights") - ep8.get("weights") == 2 * (experts - experts // 8)


def test_offload_moves_optimizer_states_to_host_per_node():
    arch = MODELS["llama-2-7b"]
    b = estimate(Config(model=arch, zero=2, dp=16, offload="optimizer"))
    assert b.get("optimizer") == 0 and b.get("gradients") == 0
    n = param_count(arch)
    host = {p.name: p.bytes for p in b.host_parts}
    assert host["host/optimizer/adam_m"] == 8 * -(-n * 4 // 16)  # 8 GPUs per node, each a 1/16 shard
    assert b.host_total > 0


def test_offloaded_optimizer_keeps_fp32_gradients_on_the_host():
    # DeepSpeed docs/code-docs/source/memory.rst (commit edaa722): with the optimizer offloaded the host holds
    # "16b for fp32: 4b params, 4b grads, 4b momentum and 4b variance" per parameter, 18 with the fp16 params offloaded
    # too (estimate_zero2_model_states_mem_needs / estimate_zero3_model_states_mem_needs' 16 and 18 before their 1.5
    # additional_buffer_factor); stage_1_and_2.py and stage3.py initialize_optimizer_states make the host gradient
    # partitions in the fp32 master dtype.
    n = 2_851_000_000
    for zero, offload, per_param in ((2, "optimizer", 16), (3, "optimizer", 16), (3, "both", 18)):
        b = estimate(Config(params=n, zero=zero, dp=8, gpus_per_node=8, precision="fp16-mixed", offload=offload))
        host = {p.name: p.bytes for p in b.host_parts}
        assert host["host/gradients"] == 8 * 4 * n // 8
        assert b.host_total == per_param * n
        assert b.get("gradients") == 0


def test_lora_freezes_the_base():
    # Hu et al. 2021: only r x (in + out) per adapted matrix trains; frozen weights get no grads or states.
    arch = MODELS["llama-2-7b"]
    b = estimate(Config(model=arch, lora_rank=16, lora_targets=("q", "v")))
    adapters = 32 * 2 * 16 * (4096 + 4096)
    assert b.trainable_params == adapters
    assert b.get("gradients") == adapters * 4
    assert b.get("optimizer") == adapters * 8  # fp32 m and v, no separate master
    assert b.get("weights") == param_count(arch) * 2 + adapters * 4


def test_qlora_base_is_four_bit_with_constants():
    # QLoRA section 3: NF4 (0.5 B) + double-quantised constants 0.127 bits/param = 0.015869... B.
    arch = MODELS["llama-2-7b"]
    b = estimate(Config(model=arch, lora_rank=16, qlora=True))
    linear = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    assert b.get("weights/quantised_linear") == linear // 2
    constants = b.get("weights/quantisation_constants")
    assert abs(Fraction(constants * 8, linear) - Fraction(127, 1000)) < Fraction(1, 1000)
    assert b.get("weights/unquantised") == 2 * (2 * 32000 * 4096 + 65 * 4096)


def test_serving_gqa_kv_cache_llama_3_8b():
    # REFERENCES.md pitfall: KV cache ignoring GQA is 4x too large for Llama-3-8B (8 KV heads of 32).
    arch = MODELS["llama-3-8b"]
    b = estimate(Config(model=arch, mode="serve", batch=1, context=8192))
    assert b.get("kv_cache") == 2 * 32 * 8 * 128 * 8192 * 2  # 1 GiB
    assert b.get("weights") == param_count(arch) * 2


def test_serving_sliding_window_caps_the_cache():
    arch = MODELS["mistral-7b"]
    short = estimate(Config(model=arch, mode="serve", context=4096)).get("kv_cache")
    long = estimate(Config(model=arch, mode="serve", context=32768)).get("kv_cache")
    assert short == long


def test_int4_serving_weights_with_group_constants():
    arch = MODELS["llama-2-7b"]
    b = estimate(Config(model=arch, mode="serve", param_dtype="int4"))
    assert b.get("weights/quantised_linear") * 2 == 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)


def test_overheads_are_named_parts():
    b = estimate(Config(params=N, overhead_fraction=0.1, cuda_context_bytes=500 * 2**20, allocator_reserve=0.05))
    assert b.part("overhead/cuda_context").bytes == 500 * 2**20
    assert b.get("overhead/allocator_reserve") == round(16 * N * 0.05)
    assert b.get("overhead/framework") == round(16 * N * 0.1)


def test_questions_fit_batch_sequence_gpus():
    """Every question compares the need (peak of a step) with capacity, exactly at the boundary (issue 13)."""
    arch = MODELS["llama-3-8b"]
    h100 = 81559 * 2**20  # H100 SXM 80GB usable (content/gpus.toml)
    config = Config(model=arch, seq_len=4096, zero=3, dp=8, attention="flash")
    needed = lambda c: need(c).bytes  # noqa: E731
    assert fits(config, h100) and Fit(h100, needed(config)).fits
    best = max_micro_batch(config, h100)
    assert needed(config.with_changes(micro_batch=best)) <= h100 < needed(config.with_changes(micro_batch=best + 1))
    longest = max_seq_len(config, h100)
    assert needed(config.with_changes(seq_len=longest)) <= h100 < needed(config.with_changes(seq_len=longest + 1))
    plan = min_gpus(Config(model=arch, seq_len=4096, zero=3, attention="flash"), h100)
    assert plan is not None and plan.gpus > 1
    assert needed(plan.config) <= h100 < needed(plan.config.with_changes(dp=plan.gpus - 1))
    assert Fit(h100, needed(Config(model=arch))).verdict().startswith("exceeds by ")


def test_uneven_pipeline_split_gives_every_stage_layers():
    # 10 layers on 7 stages: the first stage holds ceil(10/7) = 2 layers, the last floor(10/7) = 1;
    # no stage may get a negative or zero share (reported by the calculator's random-state test).
    from builder.model.inputs import stages

    arch = MODELS["gpt2"].with_changes(layers=10)
    first, last = stages(arch, Config(model=arch, seq_len=1024, pp=7, grad_accum=7))
    assert (first.layers, last.layers) == (2, 1)
    b = estimate(Config(model=arch, seq_len=1024, pp=7, grad_accum=7))
    assert all(p.bytes > 0 for p in b.parts)


def test_hybrid_shard_group_counts_context_parallel_ranks():
    arch = MODELS["llama-2-7b"]
    b = estimate(Config(model=arch, fsdp="HYBRID_SHARD", dp=4, cp=4, seq_len=8192))
    assert b.part("optimizer/adam_m").sharded_by == 8  # min(dp x cp = 16, 8 GPUs per node)
    with pytest.raises(ValueError, match=r"the shard group \(8 ranks\) must divide dp x cp = 12"):
        estimate(Config(model=arch, fsdp="HYBRID_SHARD", dp=3, cp=4, seq_len=8192, fsdp_shard_group=8))


def test_largest_is_the_unique_maximum_for_any_step_and_limit():
    # search.largest answers "limit if it fits, else the largest multiple of step in [low, limit)
    # that fits" for every monotone need, also when limit is not a multiple of step: affine, convex (an eager
    # attention's s^2) and with a jump (a step's peak moving to another phase), in at most 3 log2 + 4 estimates.
    import math

    from builder.model.search import largest

    needs = {"affine": lambda n: 7 * n + 100, "convex": lambda n: n * n + 3 * n,
             "jump": lambda n: n + (500 if n > 9 else 0)}
    for shape, need_at in needs.items():
        for step in (1, 3, 4, 7):
            for limit in (step * 5 + 2, step * 40, 1000):
                for threshold in range(0, limit + 3):
                    capacity = need_at(threshold)
                    calls = []
                    got = largest(lambda n: calls.append(n) or need_at(n), capacity, step, limit, step)
                    expected = None if threshold < step else limit if threshold >= limit else threshold // step * step
                    assert got == expected, (shape, step, limit, threshold)
                    assert len(calls) <= 3 * math.log2(limit) + 4, (shape, step, limit, threshold, calls)

def test_fsdp_with_lora_reduces_only_the_adapters_gradients():
    """FSDP2 reduce-scatters the gradients of the parameters that have one (_fsdp_param_group.py
    FSDPParamGroup.post_backward at 002a76f: fsdp_params_with_grad); LoRA's frozen base weights make none. Llama 3.1
    70B (80 layers, h 8192, 8 KV heads of 128), LoRA rank 16 on q, k, v and o: a block's adapters are
    16 x ((8192 + 8192) + (8192 + 1024) + (8192 + 1024) + (8192 + 8192)) = 819,200 parameters, fp32 gradients."""
    arch = MODELS["llama-3.1-70b"]
    lora = estimate(Config(model=arch, lora_rank=16, fsdp="FULL_SHARD", dp=8, micro_batch=1, seq_len=2048))
    assert lora.get("comm/unsharded_grads") == 819_200 * 4
    full = estimate(Config(model=arch, fsdp="FULL_SHARD", dp=8, micro_batch=1, seq_len=2048))
    # Full fine-tuning: a whole block's gradients in bf16, 8192 x (8192 + 1024 + 1024 + 8192) + 3 x 8192 x 28,672
    # + 2 x 8192 (its norms) = 855,654,400 parameters.
    assert full.get("comm/unsharded_grads") == 855_654_400 * 2
    # The frozen base weights stay bf16 shards (the model loaded in bf16), where full fine-tuning keeps fp32 shards.
    assert full.part("weights").bytes == 2 * lora.part("weights").bytes


def test_fsdp_mixed_precision_refuses_an_accumulation_dtype_that_changes_nothing():
    """FSDP casts each reduced gradient to the sharded parameter's dtype (PyTorch 2.13 _fsdp_collectives.py
    foreach_reduce, FSDP1 _runtime_utils.py _cast_grad_to_param_dtype): under bf16-mixed the sharded gradients are
    fp32 already, so grad_accum_dtype fp32 would change nothing and is refused in one line, as ZeRO-2's is."""
    from builder.model.config import validate_config

    config = Config(model=MODELS["llama-2-7b"], fsdp="FULL_SHARD", dp=8, grad_accum_dtype="fp32")
    with pytest.raises(ValueError, match=r"^grad_accum_dtype: FSDP under mixed precision keeps the sharded gradients "
                                         r"in the parameters' own dtype \(fp32\), so fp32 would change nothing"):
        validate_config(config)
    validate_config(config.with_changes(fsdp=None, zero=3))  # DeepSpeed ZeRO-3 keeps fp32 partitions on request
