"""Model states as rules: weights (plain or quantised), the master copy, gradients, LoRA adapters,
optimizer states, and the sharding that divides them (ZeRO stages, FSDP strategies), with the
communication buffers sharding adds.

Read by the estimator for every pipeline stage and, from the same rules, by the calculator's script.
The parameters a stage holds (dense, expert, linear, one block, the root unit) come in as inputs from
builder.model.placement.
"""

from __future__ import annotations

from fractions import Fraction

from builder.model.expr import (Expr, both, ceil, either, eq, fixed, fmt, has, isin, maximum, minimum, ne, negate,
                                per_unit, sym, total, when)
from builder.model.cite import Cite
from builder.model.adapters import (ADAPTER_DTYPE, ADAPTER_SOURCE, HEAD as HEAD_TARGET, HEAD_SHAPE, MLP_WIDTH,
                                    SHAPES as ADAPTER_SHAPES, TORCHTUNE)
from builder.model.float8 import ALL_GATHER as FLOAT8_ALL_GATHER, GATHERED as FLOAT8_GATHERED, HEAD as FLOAT8_HEAD
from builder.model.gradbuffers import (BF16_OPTIMIZER, DDP_BUCKETS, KEPT_NOTE, MASTER_GRADS,
                                       SYMBOLS as GRAD_BUFFERS)
from builder.model.optimizers import IN_BACKWARD, OPTIMIZER_STEP, STATE_DTYPE
from builder.model.paging import PAGED, PAGED_NOTE
from builder.model.partrules import PartRule, PerUnit, RuleSet, bytes_of
from builder.model.placement import ONLINE_BLOCKS, SCALE_BLOCK_COLS, SCALE_BLOCK_ROWS, SHARD_MODEL
from builder.model.recipes import KEPT_HIGH, TE_LINEAR, TE_PARAMS, by_recipe, recipe_on
from builder.model.serving import CHECKPOINT_DTYPE
from builder.model import buckets
from builder.model.tensors import NORM_TENSORS
from builder.model.zero3 import (COORDINATOR as ZERO3_COORDINATOR, DEEPSPEED_ZERO3, ESTIMATOR as ZERO3_ESTIMATOR,
                                 SYMBOLS as ZERO3_SYMBOLS)

ZERO = Cite("rajbhandari2019", "section 5") + " (Pos, Pos+g, Pos+g+p)"
FSDP = Cite("zhao2023", "section 3")
DEEPSPEED_ZERO3_GRADS = (Cite("deepspeed-edaa722", "deepspeed/runtime/zero/stage3.py:742-751 "
                                                   "DeepSpeedZeroOptimizer_Stage3._setup_for_real_optimizer")
                         + ": the gradient partitions are one flat buffer (grad_partitions_flat_buffer = torch.zeros("
                           "..., dtype=self.gradient_accumulation_dtype, device=self.device): data_types."
                           "grad_accum_dtype, else the parameters' dtype), allocated when the optimizer is built and "
                           "kept")
MIXED = Cite("micikevicius2017", "section 3") + " (fp32 master weights)"
# PyTorch FSDP under a mixed precision policy keeps one sharded parameter, in the dtype it was declared in (the master
# dtype, fp32), which the optimizer steps: no separate master copy. The policy's param_dtype is only what that shard is
# cast to for the all-gather (the gathered copies are comm/gathered_params), and the sharded gradient is cast back to
# the sharded parameter's dtype after the reduce-scatter (reduce_dtype is only the collective's). Read in PyTorch 2.13:
# FSDP2 torch/distributed/fsdp/_fully_shard/_fsdp_param.py FSDPParam._init_sharded_param (_sharded_param_data is
# param_data.new_zeros(...): the parameter's own dtype), init_dtype_attrs (orig_dtype = sharded_param.dtype) and
# all_gather_inputs (_to_dtype_if_needed(sharded_param_data, self.param_dtype)); _fsdp_collectives.py foreach_reduce
# (reduce_output = _to_dtype_if_needed(reduce_output, orig_dtype), then sharded_param.grad). FSDP1
# torch/distributed/fsdp/_flat_param.py FlatParamHandle (the flat parameter keeps its original dtype; _mp_shard, a
# low-precision copy of the local shard, is made in pre_unshard/_use_low_precision_shard for the all-gather and freed
# in post_unshard, _free_low_precision_sharded_param; under NO_SHARD it is the compute copy, freed in post_reshard) and
# _runtime_utils.py _cast_grad_to_param_dtype (the sharded gradient cast to the flat parameter's dtype).
FSDP_MIXED_SOURCE = (Cite("pytorch-2-13", "torch/distributed/fsdp/_fully_shard/_fsdp_param.py "
                          "FSDPParam._init_sharded_param, init_dtype_attrs and all_gather_inputs")
                     + " (the sharded parameter keeps its own dtype; param_dtype is the all-gather's) and "
                     + Cite("pytorch-2-13", "_fsdp_collectives.py foreach_reduce")
                     + " (the reduced gradient cast to the sharded parameter's dtype); FSDP1: "
                     + Cite("pytorch-2-13", "torch/distributed/fsdp/_flat_param.py FlatParamHandle")
                     + " (the flat parameter keeps its dtype; _mp_shard, the low-precision copy, freed by "
                     "_free_low_precision_sharded_param) and "
                     + Cite("pytorch-2-13", "_runtime_utils.py _cast_grad_to_param_dtype"))
OFFLOADED_GRADS = (Cite("deepspeed-edaa722", "deepspeed/runtime/zero/stage_1_and_2.py and stage3.py "
                        "initialize_optimizer_states") + ": an offloaded optimizer's gradient partitions are fp32 "
                   "tensors in host memory, beside the fp32 master copy; " + Cite("deepspeed-memory-estimator")
                   + " (4b grads of its 16 bytes per parameter)")
TM101 = Cite("anthony2023")
ADAM = Cite("kingma2014", "Algorithm 1") + "; " + ZERO
BNB = (Cite("dettmers2021") + "; " + Cite("bitsandbytes-optimizer", "bitsandbytes/optim/optimizer.py")
       + ": uint8 state + fp32 absmax per 256-element block")
TORCHAO = (Cite("torchao-low-bit-optim", "torchao/optim/subclass_8bit.py, subclass_4bit.py and subclass_fp8.py "
                "_AdamBase._new_buffer") + ": blockwise codes and an fp32 scale per block for both moments")
# torchao's low-bit AdamW states per element per moment: codes plus one fp32 scale per block (AdamW8bit: uint8
# codes, blocks of 256; AdamW4bit: two 4-bit codes per byte, blocks of 128, its default; AdamWFp8: float8_e4m3fn,
# blocks of 256).
TORCHAO_STATES = {"adamw8bit-torchao": (1 + Fraction(4, 256), "uint8 + fp32 scale per 256"),
                  "adamw4bit": (Fraction(1, 2) + Fraction(4, 128), "4-bit + fp32 scale per 128"),
                  "adamwfp8": (1 + Fraction(4, 256), "fp8 e4m3 + fp32 scale per 256")}
ADAFACTOR = Cite("shazeer2018", "section 3") + ": factored second moment (rows + columns)"
LION = Cite("chen2023lion", "Algorithm 1") + ": one momentum buffer"
SGD = Cite("pytorch-2-13", "torch/optim/sgd.py") + " (torch.optim.SGD momentum_buffer); " + TM101
LORA = Cite("hu2021", "section 4.1")
ADAPTER_BYTES = bytes_of(ADAPTER_DTYPE)  # bytes of one adapter parameter (and of its gradient)
QLORA = (Cite("dettmers2023", "section 3") + ": NF4 with block size 64, double quantisation; "
         + Cite("bitsandbytes-95f9af3", "bitsandbytes/functional.py quantize_4bit") + " (blocksize 64; "
         "compress_statistics: the absmax quantised by quantize_blockwise(blocksize=256), uint8 codes and an fp32 "
         "absmax per 256)")
FP8 = Cite("micikevicius2022")
INT8 = Cite("dettmers2022")
# A checkpoint published in fp8 (DeepSeek-V3's config.json quantization_config: quant_method fp8, fmt e4m3,
# weight_block_size [128, 128]), as the engines load it.
CHECKPOINT_SOURCE = (Cite("deepseek-v3-weights", "README_WEIGHTS.md, FP8 Weight Documentation, and inference/model.py "
                                                  "Linear") + ": float8_e4m3fn weights with an fp32 weight_scale_inv "
                     "per 128x128 block; "
                     + Cite("vllm-0.33.0", "vllm/model_executor/layers/quantization/fp8.py Fp8LinearMethod and "
                                           "Fp8MoEMethod create_weights")
                     + " (ceil(out / block) x ceil(in / block) fp32 scales a matrix; the router, embeddings, output "
                       "layer and norms unquantised) and "
                     + Cite("vllm-0.33.0", "vllm/config/model.py ModelConfig._verify_quantization")
                     + " (the checkpoint's quantization_config read with no --quantization flag; SGLang's "
                     + Cite("sglang-0.5.23", "python/sglang/srt/configs/model_config.py _parse_quant_hf_config")
                     + " likewise)")
GPTQ = (Cite("frantar2022") + "; group size 128; " + Cite("vllm-6adad08", "vllm/model_executor/layers/quantization/awq.py "
                                                              "and gptq.py create_weights")
        + ": fp16 scales and qzeros, 4-bit zeros packed eight to an int32, per group")
OFFLOAD = Cite("ren2021", "section 4") + ": fp32 states and gradients on the host"
MAIN_GRAD = Cite("megatron-memory", "megatron/training/theoretical_memory_usage.py") + " (the main_grad buffer)"
MSAMP = (Cite("peng2023fp8lm", "section 2.2") + " (FP8 optimizer); "
         + Cite("msamp", "msamp/optim/adamw_base.py LBAdamWBase")
         + ": exp_avg_dtype=torch.uint8 (fp8 e4m3), exp_avg_sq_dtype=torch.float16")
MSAMP_LINEAR = (Cite("msamp", "msamp/nn/linear.py LinearReplacer") + " (every torch.nn.Linear becomes an FP8Linear "
                "whose weight is an fp16 ScalingTensor; other modules keep their parameters) and "
                + Cite("msamp", "docs/user-tutorial/usage.md") + " (the model declared in fp32 before msamp.initialize)")
MSAMP_COPIES = (Cite("msamp", "msamp/nn/functional.py _FP8GemmFunction.forward") + " (ctx.weight_fp8 = "
                "weight.cast(Dtypes.kfloat8_e4m3): an fp8 copy of each linear weight kept for its backward)")
MSAMP_NOTE = ("simplification: each moment is a ScalingTensor with a few fp32 scaling values per tensor (ScalingMeta: "
              "scale, scale_inv, amax), left out")

# gpt-oss's MXFP4 checkpoint served (Architecture.checkpoint_quantization 'mxfp4'): the routed experts' gate_up_proj and
# down_proj as 4-bit e2m1 values, two to a byte, and one uint8 E8M0 scale per 32 (OCP Microscaling Formats v1.0,
# MXFP4: 4.25 bits a value), everything else bf16. vLLM reads quant_method 'mxfp4' from config.json
# (vllm/model_executor/layers/quantization/mxfp4.py GptOssMxfp4Config: Linear layers and attention unquantised,
# GptOssMxfp4MoEMethod.create_weights: w13_weight (E, 2 x I, h / 2) and w2_weight (E, h, I / 2) uint8 with
# w13_weight_scale (E, 2 x I, h / 32) and w2_weight_scale (E, h, I / 32) uint8) and so does SGLang
# (python/sglang/srt/layers/quantization/mxfp4.py Mxfp4MoEMethod.create_weights, the same shapes). On Hopper both take
# OpenAI's Triton kernels, which pad each rank's expert width I / tp to a multiple of 64 (vLLM 0.33.0
# fused_moe/oracle/mxfp4.py mxfp4_round_up_hidden_size_and_intermediate_size, the TRITON backend's `else` branch, and
# _get_priority_backends_for_gpt_oss; SGLang 0.5.23 Mxfp4MoEMethod.create_weights, triton_kernels_padding_alignment
# 64, the moe_runner_backend triton_kernel its gpt-oss override picks on Hopper): 2,880 stays 2,880 at tp 1, and is
# 1,472 (not 1,440) at tp 2, 768 at tp 4, 384 at tp 8.
MXFP4_SOURCE = (Cite("ocp-mx-1.0", "MXFP4") + ": e2m1 values and an E8M0 scale per 32 (4.25 bits a "
                "value); " + Cite("vllm-0.33.0", "vllm/model_executor/layers/quantization/mxfp4.py GptOssMxfp4MoEMethod."
                                      "create_weights") + " (w13/w2 uint8 values, h/32 and I/32 uint8 scales); "
                + Cite("vllm-0.33.0", "vllm/model_executor/layers/fused_moe/oracle/mxfp4.py "
                                      "mxfp4_round_up_hidden_size_and_intermediate_size") + " (Hopper's Triton "
                "kernels: each rank's expert width rounded up to 64); "
                + Cite("sglang-0.5.23", "python/sglang/srt/layers/quantization/mxfp4.py Mxfp4MoEMethod.create_weights"))
MXFP4_NOTE = ("simplification: Hopper's Triton layout; Blackwell's FlashInfer kernels and vLLM's Marlin kernel (GPUs "
              "before Hopper) pad the hidden size too (to 128 or 256) and the width to 128, not modelled; the Triton "
              "kernels' swizzled scales (rows padded to 256) and the experts' biases in fp32 add about 0.2% (gpt-oss-"
              "120b: 0.2 GiB), left out")
MXFP4 = both(eq(sym("mode"), "serve"), eq(sym("checkpoint_quantization"), "mxfp4"))
MXFP4_ALIGN = 64  # the Triton kernels' padding of a rank's expert width (vLLM's and SGLang's, on Hopper)


def mxfp4_expert_elements(intermediate_align: int = MXFP4_ALIGN, hidden_align: int = 1) -> Expr:
    """The routed experts' weight elements one GPU stores as MXFP4 values: per layer of the stage, experts / ep
    experts of 3 x h' x I', where I' is the rank's expert width I / tp rounded up to `intermediate_align` and h' the
    hidden size rounded up to `hidden_align` (the Triton kernels: 64 and 1; vLLM's Marlin kernel: 128 and 256,
    fused_moe/oracle/mxfp4.py, as the tests check against a published log)."""
    width = intermediate_align * ceil(sym("expert_ffn") / (intermediate_align * sym("tp")))
    hidden = hidden_align * ceil(sym("hidden") / hidden_align)
    matrices = when(eq(sym("mlp"), "swiglu"), 3, 2)
    return sym("stage_layers") * sym("experts") / sym("ep") * matrices * hidden * width


# Bytes per element of a dtype named by a rule.
# What a per-parameter state costs, in words: '2 B/param (bf16)'.
per_param = lambda amount, what: PerUnit(amount, "param", what)  # noqa: E731


def sharded(dense: Expr, expert: Expr, dense_ranks: Expr, expert_ranks: Expr) -> Expr:
    """Parameters of a state on this GPU after data-parallel sharding. FSDP (per-parameter sharding, FSDP2
    fully_shard) splits each tensor along dim 0 in chunks of ceil(dim0 / n) (torch.chunk), so the first
    ranks hold the rounded-up chunk: counted exactly where every tensor's shape is known."""
    return when(both(sym("exact_shapes"), dense_ranks > 1),
                total(sym("parameter_tensors"), sym("count") * when(sym("in_block"), sym("layers"), 1)
                      * ceil(sym("dim0") / dense_ranks) * sym("rest")),
                dense / dense_ranks + expert / expert_ranks)


# How many ranks share each state (1: replicated). Context-parallel ranks hold the same parameters, so
# ZeRO/FSDP shard over dp x cp (Megatron-LM's distributed optimizer uses the data-parallel-with-context
# group); HYBRID_SHARD shards within a group (default: one node) and replicates across groups.
SHARD_RANKS = sym("dp") * sym("cp")
HYBRID_GROUP = when(sym("fsdp_shard_group"), sym("fsdp_shard_group"), minimum(SHARD_RANKS, sym("gpus_per_node")))
SHARD_GROUP = when(eq(sym("fsdp"), "HYBRID_SHARD"), HYBRID_GROUP, SHARD_RANKS)
SHARDING = {
    "shard_group": SHARD_GROUP,
    "expert_shard_group": maximum(1, sym("shard_group") // sym("ep")),
    **{f"{prefix}{state}_ranks": when(sym("shard_stage") >= stage, sym(group), 1)
       for prefix, group in (("", "shard_group"), ("expert_", "expert_shard_group"))
       for state, stage in (("param", 3), ("grad", 2), ("optimizer", 1))},
    "shard_label": when(sym("fsdp"), fmt("FSDP {0}", sym("fsdp")), fmt("ZeRO-{0}", sym("shard_stage"))),
    "exact_shapes": both(sym("has_architecture"), sym("fsdp"), negate(sym("experts")), eq(sym("tp"), 1),
                         eq(sym("pp"), 1), eq(sym("ep"), 1), negate(sym("lora_rank"))),
}

# LoRA adapters (Hu et al. 2021, section 4.1): r x (in + out) per targeted projection, split over TP ranks: one
# block's (LAYER_ADAPTERS), and the output layer's on the stage with the head (HEAD_ADAPTERS, r x (hidden + vocab):
# builder.model.adapters.HEAD).
LAYER_ADAPTERS = (sym("lora_rank") * sum((when(has(sym("lora_targets"), name), d_in + d_out, 0)
                                          for name, (d_in, d_out) in ADAPTER_SHAPES.items()), start=Fraction(0))
                  / sym("tp"))
HEAD_ADAPTERS = when(both(has(sym("lora_targets"), HEAD_TARGET), sym("stage_has_head")),
                     sym("lora_rank") * (HEAD_SHAPE[0] + HEAD_SHAPE[1]) / sym("tp"), 0)
ADAPTERS = {
    "mlp_width": MLP_WIDTH,
    "adapters": LAYER_ADAPTERS * sym("stage_layers") + HEAD_ADAPTERS,
    "lora": both(sym("lora_rank"), sym("has_architecture")),
}

# Quantised weights: bytes per linear weight and the constants each format stores beside it.
# torchtune's QLoRA weights are torchao's NF4Tensor.
TORCHAO_QLORA = (Cite("dettmers2023", "section 3") + ": NF4; " + Cite("torchao-nf4", "torchao/dtypes/nf4tensor.py "
                 "NF4Tensor.from_tensor and double_quantize_scalers") + " (to_nf4 in torchtune's LoRALinear and "
                 "FrozenNF4Linear: block 64, scaler block 256, int8 scalers, a quantization_factor per scaler block in "
                 "the weight's dtype)")
_QLORA_OR_NF4 = either(sym("qlora"), eq(sym("param_dtype"), "nf4"))
# The linear weights of a GEMM on this GPU: the blocks' weight matrices, not norms, biases or the MoE router
# (builder.model.placement's gemms), sharded as the rest.
GEMMS_HERE = ((sym("gemms") - sym("expert_gemms")) / sym("param_ranks")
              + sym("expert_gemms") / sym("expert_param_ranks"))
# A checkpoint published quantised (builder.model.serving.CHECKPOINT_QUANTIZATIONS), served in its own format: its
# quantised weights are the GEMMs' matrices alone, with an fp32 scale per block of checkpoint_block_rows x _cols
# (one per tensor without blocks, left out as the other per-tensor scales). vLLM quantises what Fp8Config hands
# Fp8LinearMethod and Fp8MoEMethod (LinearBase and RoutedExperts layers) and builds DeepSeek's router (GateLinear,
# quant_config None), the embedding and the output layer (VocabParallelEmbedding, ParallelLMHead) and the norms
# unquantised: vllm/model_executor/layers/quantization/fp8.py and models/deepseek_v2.py, release v0.33.0.
CHECKPOINT_FORMAT = both(eq(sym("mode"), "serve"), sym("checkpoint_quantization"),
                         eq(sym("param_dtype"), CHECKPOINT_DTYPE))
# fp8 weights quantised at load with vLLM's --quantization fp8_per_block (weight_scales "block") keep the same fp32
# scale per 128 x 128 block (builder.model.serving ONLINE_FP8_SCALES), counted by the same rule.
ONLINE_FP8 = both(eq(sym("mode"), "serve"), eq(sym("param_dtype"), "fp8"), sym("weight_scales"))
BLOCK_SCALED = either(both(sym("checkpoint_format"), sym("checkpoint_block_rows") > 0), both(ONLINE_FP8, ONLINE_BLOCKS))
# fp8 with one scale a tensor (negligible, not counted): vLLM's fp8 and fp8_per_tensor; fp8_per_channel keeps one per
# output row, int8's rule.
PER_TENSOR_FP8 = both(eq(sym("param_dtype"), "fp8"), ne(sym("weight_scales"), "channel"))
ONLINE_SOURCE = (FP8 + "; " + Cite("vllm-0.33.0", "vllm/model_executor/layers/quantization/online/fp8.py "
                                   "Fp8PerBlockOnlineLinearMethod (weight_scale_inv, ceil(out / 128) x ceil(in / 128) "
                                   "fp32 a matrix) and Fp8PtpcOnlineLinearMethod (an fp32 weight_scale per output "
                                   "row), with their MoE methods")
                 + " (" + Cite("vllm-0.33.0", "vllm/config/quantization.py _ONLINE_SHORTHANDS") + ")")
BLOCK_SCALE_BYTES = 4  # weight_scale_inv is fp32
QUANTISATION = {
    "mxfp4": MXFP4,
    "quantised": either(sym("qlora"), both(eq(sym("mode"), "serve"), bytes_of(sym("param_dtype")) < 2), MXFP4),
    "checkpoint_format": CHECKPOINT_FORMAT,
    "block_scaled": BLOCK_SCALED,
    "quantised_bytes": when(either(sym("qlora"), MXFP4), Fraction(1, 2), bytes_of(sym("param_dtype"))),
    # fp8: one fp32 scale per tensor (negligible); int8, and fp8 with vLLM's fp8_per_channel (weight_scales "channel"):
    # one fp32 scale per output row (LLM.int8, section 3; vLLM online/fp8.py Fp8PtpcOnlineLinearMethod),
    # 4/h B/param; NF4: an fp32 absmax per 64 weights or, double quantised, an 8-bit absmax per 64 plus an fp32
    # constant per 256 blocks (QLoRA section 3: 0.5 -> 0.127 bits per parameter); GPTQ/AWQ int4: an fp16 scale
    # and a 4-bit zero (packed eight to an int32) per group of 128.
    # torchtune's QLoRA (torchao's NF4Tensor, to_nf4(weight) with block 64 and scaler block 256: NF4Tensor.from_tensor
    # and double_quantize_scalers at v0.5.0) keeps an int8 scaler per 64 weights and a quantization_factor per 256
    # scalers in the weight's own dtype (bf16), plus one scaler_mean and the 16-value nf4 table per tensor (left out).
    # fp8 in blocks (a checkpoint's: DeepSeek-V3's 128 x 128): an fp32 scale per block, 4 / (rows x columns)
    # B/param; the part counts each matrix's blocks rounded up (block_scales).
    "constant_bytes": when(MXFP4, Fraction(1, 32), when(both(sym("qlora"), TORCHTUNE),
                           Fraction(1, 64) + bytes_of(sym("param_dtype")) / (64 * 256),
                           when(sym("block_scaled"), BLOCK_SCALE_BYTES / (SCALE_BLOCK_ROWS * SCALE_BLOCK_COLS),
                                when(eq(sym("quantised_bytes"), 1),
                                     when(PER_TENSOR_FP8, 0, 4 / when(sym("hidden"), sym("hidden"), 4096)),
                                     when(_QLORA_OR_NF4,
                                          when(sym("qlora_double_quant"), Fraction(1, 64) + Fraction(4, 64 * 256),
                                               Fraction(4, 64)),
                                          Fraction(2, 128) + Fraction(1, 2 * 128)))))),
    "constants_are": when(MXFP4, "uint8 E8M0 scale per 32 values", when(both(sym("qlora"), TORCHTUNE),
                          fmt("NF4 constants (torchao: int8 scaler per 64, {0} factor per 256 scalers)",
                              sym("param_dtype")),
                          when(sym("block_scaled"),
                               fmt("fp32 scale per {0}x{1} block", SCALE_BLOCK_ROWS, SCALE_BLOCK_COLS),
                               when(eq(sym("quantised_bytes"), 1),
                                    when(PER_TENSOR_FP8, "per-tensor scales",
                                         "fp32 scale per output row"),
                                    when(_QLORA_OR_NF4,
                                         when(sym("qlora_double_quant"), "NF4 constants (block 64, double quantised)",
                                              "NF4 constants (fp32 absmax per 64)"),
                                         "fp16 scale + 4-bit zero per 128 weights"))))),
    # The scales a block-quantised checkpoint keeps: each matrix's blocks, rounded up (builder.model.placement's
    # layer_gemm_blocks), in fp32.
    "block_scales": sym("layer_gemm_blocks") * sym("stage_layers") * BLOCK_SCALE_BYTES,
    "weights_here": sharded(sym("dense"), sym("expert"), sym("param_ranks"), sym("expert_param_ranks")),
    # The quantised parameters on this GPU (MXFP4: the routed experts' weight matrices, biases aside; a checkpoint's
    # fp8: the GEMMs' matrices) and the elements stored for them (MXFP4: padded as the kernels pad them,
    # mxfp4_expert_elements).
    "linear_params": when(MXFP4, sym("expert_gemms"),
                          when(sym("checkpoint_format"), GEMMS_HERE,
                               sym("weights_here") * when(sym("dense") + sym("expert"),
                                                          sym("linear") / (sym("dense") + sym("expert")), 1))),
    "linear_weights": when(MXFP4, mxfp4_expert_elements(), sym("linear_params")),
    # QLoRA's unquantised parameters that the preparation casts to fp32 (builder.model.config.KBIT_PREPARE): all of
    # them (PEFT's prepare_model_for_kbit_training: every fp16/bf16 parameter that is not Params4bit), or the norms
    # alone (the embeddings and the output layer cast back to bf16 after it: qlora.py --bf16, TRL up to v0.25).
    "kbit_fp32": when(both(sym("qlora"), eq(sym("mode"), "train")),
                      when(eq(sym("kbit_prepare"), "prepare"), sym("weights_here") - sym("linear_weights"),
                           when(eq(sym("kbit_prepare"), "prepare-bf16"),
                                when(sym("has_architecture"),
                                     (sym("layer_norms") * sym("stage_layers")
                                      + when(sym("stage_has_head"), sym("hidden") * NORM_TENSORS, 0))
                                     / sym("param_ranks"), 0), 0)), 0),
}

# Adafactor's factored second moment (Shazeer & Stern 2018, section 3): rows + columns per matrix, the
# whole of each vector; as a share of all parameters, spread over GPUs in proportion to parameters.
_LAYER_FACTORS = ((sym("hidden") + sym("heads") * sym("head_dim")) * 2
                  + (sym("hidden") + sym("kv_heads") * sym("head_dim")) * 2
                  + when(eq(sym("mlp"), "swiglu"), 3, 2) * (sym("hidden") + sym("mlp_width"))
                  * maximum(1, sym("experts"))
                  + 2 * sym("hidden") * when(eq(sym("norm"), "layernorm"), 2, 1))
ADAFACTOR_SHARE = {
    "adafactor_share": when(sym("params"), (_LAYER_FACTORS * sym("layers") + (sym("vocab") + sym("hidden"))
                                            * when(sym("tied_embeddings"), 1, 2)) / sym("params"), 0),
}

# MS-AMP (precision msamp-o2): its LinearReplacer turns every nn.Linear, the output layer included, into an FP8Linear
# with an fp16 weight; embeddings, norms and the linear layers' biases stay as the model was declared (fp32, MS-AMP's
# usage guide), with gradients of that dtype. A tied output layer becomes a separate FP8Linear weight (the replacer
# builds a new parameter), so the vocabulary matrix is held twice. Without an architecture every parameter counts as
# linear.
_MSAMP_ARCH = both(sym("msamp"), sym("has_architecture"))
MSAMP_SCOPE = {
    "msamp_linear_here": when(_MSAMP_ARCH, sym("linear_matrices") + when(
        both(sym("stage_has_head"), negate(sym("tied_embeddings"))), sym("vocab_rows"), 0), 0),
    "msamp_fp8_linear": sym("msamp_linear_here") + when(
        both(_MSAMP_ARCH, sym("stage_has_head"), sym("tied_embeddings")), sym("vocab_rows"), 0),
    "kept_dtype": when(_MSAMP_ARCH, "fp32", when(sym("fsdp_shard_is_master"), sym("master_dtype"), sym("param_dtype"))),
    "kept_grad_dtype": when(_MSAMP_ARCH, "fp32", sym("grad_dtype")),
}

# Low-precision recipes (builder.model.recipes): the linear weights on this GPU, what their quantised copy costs.
RECIPE_STATES = {
    "recipe_on": recipe_on(),
    "quantised_gemms": both(sym("recipe_on"), sym("quantised_params")),
    "gemms_here": GEMMS_HERE,
    "recipe_weight_bytes": by_recipe("weight"),
    "recipe_words": fmt("{0} B/linear param ({1})", per_unit(sym("recipe_weight_bytes")), by_recipe("weight_words", "")),
}
# Sources are rules of their own, not derived symbols: the browser gets each part's source with its citations
# already rendered (RuleSet.encode), which only reaches the text the part's own rule holds.
# PEFT's prepare_model_for_kbit_training and what the QLoRA recipes do after it (builder.model.config.KBIT_PREPARE).
KBIT_PREPARE_SOURCE = when(eq(sym("kbit_prepare"), "prepare"),
                           Cite("peft-kbit", "peft/utils/other.py prepare_model_for_kbit_training") + ": every fp16 or "
                           "bf16 parameter that is not Params4bit is cast to fp32",
                           Cite("peft-kbit", "peft/utils/other.py prepare_model_for_kbit_training") + " casts them to "
                           "fp32; " + Cite("qlora-repo", "qlora.py get_accelerate_model") + " (--bf16) then casts "
                           "lm_head and embed_tokens back to bf16 and leaves the norms in fp32")
KBIT_NOTE = ("the saved activations grow too: an fp32 norm weight makes its output fp32, bitsandbytes' "
             "Linear4bit.forward casts its output back to its input's dtype, and (prepare) an fp32 embedding makes "
             "the residual stream fp32 (" + Cite("bitsandbytes-95f9af3", "bitsandbytes/nn/modules.py Linear4bit.forward")
             + "); counted in the activations (fp32 without autocast, fp32 stream and MLP under autocast)")
QUANTISATION_SOURCE = when(MXFP4, MXFP4_SOURCE, when(both(sym("qlora"), TORCHTUNE), TORCHAO_QLORA,
                           when(sym("checkpoint_format"), CHECKPOINT_SOURCE,
                                when(eq(sym("quantised_bytes"), 1),
                                     when(eq(sym("param_dtype"), "fp8"), when(ONLINE_FP8, ONLINE_SOURCE, FP8), INT8),
                                     when(_QLORA_OR_NF4, QLORA, GPTQ)))))
RECIPE_SOURCE = by_recipe("source", "")
RECIPE_NOTE = fmt("{0}; {1}", KEPT_HIGH, by_recipe("left_out", ""))

TRAIN = eq(sym("mode"), "train")
# QLoRA with bitsandbytes under FSDP: the quantisation constants stay whole on every rank (COMM's QLORA_FSDP_GATHER
# has the sources).
BNB_CONSTANTS_WHOLE = both(TRAIN, sym("qlora"), negate(TORCHTUNE), sym("fsdp"), sym("param_ranks") > 1)
BNB_FSDP_CONSTANTS = (Cite("bitsandbytes-95f9af3", "bitsandbytes/nn/modules.py Params4bit and "
                                                   "fix_4bit_weight_quant_state_from_module")
                      + ": the quant_state (absmax and its constants) a Python attribute of the weight and its module, "
                        "neither parameter nor buffer, so FSDP neither shards nor gathers it")
PLAIN_STATES = both(TRAIN, negate(sym("lora")))
# FSDP with a master dtype apart from the param dtype (bf16-mixed, fp16-mixed): the sharded parameter stays in the
# master dtype and the sharded gradients are cast to it (FSDP_MIXED_SOURCE). DeepSpeed ZeRO and Megatron keep 16-bit
# parameters and gradients beside an fp32 master. Left as they are: a recipe's quantised parameters and MS-AMP, whose
# parameters are their own.
# Not with LoRA: its frozen base weights stay in the param dtype the model was loaded in (PEFT's and torchtune's
# recipes load it in bf16, so FSDP's shards are bf16), and only the adapters train.
FSDP_MIXED = both(sym("fsdp"), sym("master_dtype"), ne(sym("master_dtype"), sym("param_dtype")),
                  negate(sym("quantised_params")), negate(sym("msamp")), eq(sym("lora_rank"), 0))
# The kept weights are that fp32 shard (FULL_SHARD, HYBRID_SHARD) or the whole fp32 parameters (NO_SHARD), with no
# optimizer/master part. SHARD_GRAD_OP (reshard_after_forward=False) is counted as before: its 16-bit weights, whole,
# stand for the unsharded copies held from the forward to the backward, and optimizer/master for the fp32 sharded
# flat parameter the optimizer steps.
FSDP_SHARD_IS_MASTER = both(FSDP_MIXED, ne(sym("fsdp"), "SHARD_GRAD_OP"))
SHARD_GRAD_OP_MIXED = both(FSDP_MIXED, eq(sym("fsdp"), "SHARD_GRAD_OP"))
SHARD_GRAD_OP_NOTE = ("FSDP SHARD_GRAD_OP keeps the 16-bit copies gathered in the forward until the backward: counted "
                      "here whole, with the fp32 sharded flat parameter as the master part; simplification: counted at "
                      "every moment, though the backward frees each unit's")
NO_SHARD_NOTE = ("FSDP NO_SHARD keeps the parameters whole in fp32 and the optimizer steps them; simplification: the "
                 "16-bit copy of the unit being computed (FSDP1's _mp_shard, made before its forward or backward and "
                 "freed after) is left out")
OPTIMIZER_STATE_DTYPE = {
    # torch keeps optimizer states in the parameter's dtype: LoRA adapters' are the adapter dtype's (optimizers).
    "state_dtype": STATE_DTYPE,
    # Adam's moments one by one where a policy or an option sets them apart (torch's exp_avg and exp_avg_sq; MS-AMP
    # LBAdamW's exp_avg_dtype and exp_avg_sq_dtype), else the state dtype.
    "exp_avg_state_dtype": when(sym("exp_avg_dtype"), sym("exp_avg_dtype"), sym("state_dtype")),
    "exp_avg_sq_state_dtype": when(sym("exp_avg_sq_dtype"), sym("exp_avg_sq_dtype"), sym("state_dtype")),
    "trainable_dense": when(sym("lora"), sym("adapters"), sym("dense")),
    "trainable_expert": when(sym("lora"), 0, sym("expert")),
    "states_here": sharded(sym("trainable_dense"), sym("trainable_expert"), sym("optimizer_ranks"),
                           sym("expert_optimizer_ranks")),
    "grads_here": sharded(sym("trainable_dense"), sym("trainable_expert"), sym("grad_ranks"), sym("expert_grad_ranks")),
    # DeepSpeed ZeRO-3 keeps the gradient partitions in grad_accum_dtype itself (stage3.py grad_partitions_flat_buffer,
    # dtype=self.gradient_accumulation_dtype), so an fp32 accumulation dtype makes the sharded gradients fp32 with no
    # second buffer beside them. (ZeRO-2 accumulates in the gradients' own dtype whatever grad_accum_dtype says:
    # builder.model.checks refuses it.)
    "zero3_accumulates": both(eq(sym("shard_stage"), 3), negate(sym("fsdp")), sym("grad_accum_dtype")),
    # An offloaded optimizer steps the fp32 master copy on the host with fp32 gradients: DeepSpeed's ZeRO-Offload
    # keeps each gradient partition in host memory in the master dtype (stage_1_and_2.py initialize_optimizer_states:
    # torch.zeros(partition_size, dtype=single_partition_of_fp32_groups[i].dtype, device=self.device), the device
    # 'cpu' under cpu_offload; stage3.py initialize_optimizer_states likewise, fp32_partitioned_groups_flat[i].grad),
    # as docs/code-docs/source/memory.rst counts it: '16b for fp32: 4b params, 4b grads, 4b momentum and 4b variance'.
    "offloaded_optimizer": isin(sym("offload"), "optimizer", "both"),
    "host_grads_fp32": both(sym("offloaded_optimizer"), sym("master_dtype"), ne(sym("master_dtype"), sym("grad_dtype"))),
    # FSDP under mixed precision casts the reduced gradient to the sharded parameter's dtype (FSDP_MIXED_SOURCE).
    "fsdp_mixed": FSDP_MIXED,
    "fsdp_shard_is_master": FSDP_SHARD_IS_MASTER,
    "stored_grad_dtype": when(sym("host_grads_fp32"), sym("master_dtype"),
                              when(sym("zero3_accumulates"), sym("grad_accum_dtype"),
                                   when(sym("fsdp_mixed"), sym("master_dtype"), sym("grad_dtype")))),
}
_ON_GPU = negate(isin(sym("offload"), "params", "both"))
_ADAM_BLOCK = 1 + Fraction(4, 256)


def _adam(moment: str, label: str, dtype: str) -> tuple[PartRule, ...]:
    """Adam's moment `moment` in its dtype (the symbol `dtype`), and as bitsandbytes' blockwise 8-bit state."""
    return (PartRule(f"optimizer/adam_{moment}", sym("states_here") * bytes_of(sym(dtype)),
                     "N x bytes(state dtype)", when(sym("msamp"), MSAMP, when(sym("paged"), fmt("{0}; {1}", PAGED, ADAM),
                                                                              ADAM)),
                     PerUnit(bytes_of(sym(dtype)), "param", fmt("{0} {1}", sym(dtype), label)),
                     when(sym("msamp"), MSAMP_NOTE, when(sym("paged"), PAGED_NOTE, "")),
                     when=both(TRAIN, isin(sym("optimizer"), "adam", "adamw", "paged-adamw")),
                     sharded_by=sym("optimizer_ranks")),
            PartRule(f"optimizer/adam_{moment}", sym("states_here") * _ADAM_BLOCK, "N x (1 B + 4 B / 256)",
                     when(sym("paged"), fmt("{0}; {1}", PAGED, BNB), BNB),
                     per_param(_ADAM_BLOCK, "uint8 + fp32 absmax per 256"),
                     when(sym("paged"), fmt("{0}; bitsandbytes keeps tensors under 4096 elements in 32-bit, ignored "
                                            "here", PAGED_NOTE),
                          "bitsandbytes keeps tensors under 4096 elements in 32-bit; ignored here"),
                     when=both(TRAIN, isin(sym("optimizer"), "adam8bit", "paged-adamw8bit")),
                     sharded_by=sym("optimizer_ranks")),
            *(PartRule(f"optimizer/adam_{moment}", sym("states_here") * size, f"N x {size} B", TORCHAO,
                       per_param(size, words),
                       "torchao keeps tensors under 4096 elements (or not a whole number of blocks) in the parameter's "
                       "dtype, and a 1 KiB code table per 8-bit state; ignored here",
                       when=both(TRAIN, eq(sym("optimizer"), name)), sharded_by=sym("optimizer_ranks"))
              for name, (size, words) in TORCHAO_STATES.items()))


MODEL_STATES = RuleSet(
    symbols={**SHARDING, **ADAPTERS, **QUANTISATION, **ADAFACTOR_SHARE, **OPTIMIZER_STATE_DTYPE, **OPTIMIZER_STEP,
             **RECIPE_STATES, **MSAMP_SCOPE, **GRAD_BUFFERS},
    parts=(
        PartRule("weights", (sym("weights_here") - when(sym("quantised_gemms"), sym("gemms_here"), 0)
                             - sym("msamp_linear_here")) * bytes_of(sym("kept_dtype")),
                 when(either(sym("quantised_gemms"), sym("msamp_linear_here")), "(N_gpu - N_linear) x bytes(param dtype)",
                      when(sym("fsdp_shard_is_master"), "N_gpu x bytes(master dtype)", "N_gpu x bytes(param dtype)")),
                 when(sym("msamp_linear_here"), MSAMP_LINEAR,
                      when(sym("fsdp_mixed"), FSDP_MIXED_SOURCE, when(sym("master_dtype"), MIXED, TM101))),
                 per_param(bytes_of(sym("kept_dtype")), sym("kept_dtype")),
                 when(sym("param_ranks") > 1,
                      when(sym("fsdp_shard_is_master"),
                           fmt("{0} shards weights over {1} ranks; each rank keeps its shard in {2}, which the "
                               "optimizer steps (no separate master copy), and gathers {3} copies for compute (comm)",
                               sym("shard_label"), sym("param_ranks"), sym("master_dtype"), sym("param_dtype")),
                           fmt("{0} shards weights over {1} ranks", sym("shard_label"), sym("param_ranks"))),
                      when(both(sym("fsdp_shard_is_master"), eq(sym("fsdp"), "NO_SHARD")), NO_SHARD_NOTE,
                           when(SHARD_GRAD_OP_MIXED, SHARD_GRAD_OP_NOTE,
                                when(sym("quantised_gemms"), "the weights the recipe does not quantise (embeddings, "
                                                             "norms, biases, router, output layer)",
                                     when(sym("msamp_linear_here"), "the parameters MS-AMP leaves as declared "
                                                                    "(embeddings, norms, biases), in fp32", ""))))),
                 when=both(_ON_GPU, negate(sym("quantised"))), sharded_by=sym("param_ranks")),
        PartRule("weights/scaling_linear", sym("msamp_fp8_linear") * bytes_of(sym("param_dtype")),
                 "N_linear x bytes(param dtype)", MSAMP_LINEAR,
                 fmt("{0} B/linear param ({1} with a scaling factor)", per_unit(bytes_of(sym("param_dtype"))),
                     sym("param_dtype")),
                 when(both(sym("stage_has_head"), sym("tied_embeddings")),
                      "the output layer's weight is a new parameter beside the tied embedding", ""),
                 when=both(TRAIN, _ON_GPU, sym("msamp_fp8_linear") > 0)),
        PartRule("weights/low_precision_copies", sym("msamp_fp8_linear"), "N_linear x 1 B", MSAMP_COPIES,
                 "1 B/linear param (fp8 e4m3)",
                 "simplification: each copy lives from its layer's forward to its backward; counted at every moment "
                 "of the step, the optimizer step included",
                 when=both(TRAIN, sym("msamp_fp8_linear") > 0)),
        # A recipe with quantised parameters (TE quantized_model_init, Megatron-LM --fp8-param-gather): the linear
        # weights exist only quantised, row-wise and column-wise.
        PartRule("weights/quantised_linear", sym("gemms_here") * sym("recipe_weight_bytes"),
                 fmt("N_linear x {0} B", per_unit(sym("recipe_weight_bytes"))),
                 fmt("{0}; {1}", TE_PARAMS, RECIPE_SOURCE), sym("recipe_words"), RECIPE_NOTE,
                 when=both(_ON_GPU, sym("quantised_gemms")), sharded_by=sym("param_ranks")),
        # A recipe over 16-bit parameters: the quantised copy of every linear weight beside it, cached between
        # micro-batches and steps. Sharded parameters are not cached (TE makes no workspace cache under FSDP2):
        # each gathered block is quantised for its own forward and backward.
        PartRule("weights/low_precision_copies",
                 when(sym("param_ranks") > 1, sym("layer_gemms"), sym("gemms_here")) * sym("recipe_weight_bytes"),
                 when(sym("param_ranks") > 1, fmt("one block's linear weights x {0} B", per_unit(sym("recipe_weight_bytes"))),
                      fmt("N_linear x {0} B", per_unit(sym("recipe_weight_bytes")))),
                 fmt("{0}; {1}", TE_LINEAR, RECIPE_SOURCE), sym("recipe_words"),
                 when(sym("param_ranks") > 1,
                      "simplification: with sharded parameters TE caches no copy (FSDP2) and quantises each gathered "
                      "block for its forward and backward; one block's copy is counted", RECIPE_NOTE),
                 when=both(sym("recipe_on"), negate(sym("quantised_params")))),
        PartRule("weights/quantised_linear", sym("linear_weights") * sym("quantised_bytes"),
                 when(MXFP4, "N_experts' matrices (padded) x 0.5 B",
                      fmt("N_linear x {0} B", per_unit(sym("quantised_bytes")))),
                 QUANTISATION_SOURCE,
                 per_param(sym("quantised_bytes"),
                           when(sym("qlora"), "nf4", when(MXFP4, "fp4 e2m1", sym("param_dtype")))),
                 when(MXFP4, MXFP4_NOTE,
                      when(sym("checkpoint_format"),
                           fmt("the checkpoint's own {0} (config.json quantization_config), which vLLM and SGLang "
                               "load with no --quantization flag; training loads the 16-bit weights",
                               sym("param_dtype")), "")),
                 when=both(_ON_GPU, sym("quantised")), sharded_by=sym("param_ranks")),
        # bitsandbytes' quant_state is no parameter, so FSDP leaves it whole on every rank (QLORA_FSDP_GATHER). A
        # checkpoint quantised in blocks keeps each matrix's blocks rounded up (block_scales).
        PartRule("weights/quantisation_constants",
                 when(sym("block_scaled"), sym("block_scales"),
                      when(BNB_CONSTANTS_WHOLE, sym("linear"), sym("linear_weights")) * sym("constant_bytes")),
                 when(sym("block_scaled"),
                      fmt("ceil(rows / {0}) x ceil(cols / {1}) x 4 B per linear weight matrix",
                          SCALE_BLOCK_ROWS, SCALE_BLOCK_COLS),
                      when(BNB_CONSTANTS_WHOLE, "N_linear (all of the stage's, unsharded) x constant bytes",
                           "N_linear x constant bytes")),
                 when(BNB_CONSTANTS_WHOLE, fmt("{0}; {1}", QUANTISATION_SOURCE, BNB_FSDP_CONSTANTS),
                      QUANTISATION_SOURCE),
                 PerUnit(sym("constant_bytes"), "param",
                         words=fmt("{0} B/param ({1})", fixed(sym("constant_bytes"), 4), sym("constants_are"))),
                 when(BNB_CONSTANTS_WHOLE, fmt("FSDP shards the packed 4-bit weights over {0} ranks, not "
                                               "bitsandbytes' quant_state, which every rank holds whole",
                                               sym("param_ranks")), ""),
                 when=both(_ON_GPU, sym("quantised")),
                 sharded_by=when(BNB_CONSTANTS_WHOLE, 1, sym("param_ranks"))),
        PartRule("weights/unquantised", (sym("weights_here") - sym("linear_params") - sym("kbit_fp32")) * 2,
                 when(eq(sym("kbit_prepare"), "prepare-bf16"), "N_embeddings+output layer x 2 B",
                      when(MXFP4, "(N_gpu - N_experts' matrices) x 2 B",
                           when(sym("checkpoint_format"), "(N_gpu - N_linear) x 2 B", "N_embeddings+norms x 2 B"))),
                 QUANTISATION_SOURCE, per_param(2, when(sym("qlora"), "bf16", sym("activation_dtype"))),
                 when(eq(sym("kbit_prepare"), "prepare-bf16"),
                      "embeddings and output layer cast back to bf16 after prepare_model_for_kbit_training",
                      when(MXFP4, "attention, router, norms, the experts' biases, embeddings and output layer stay "
                                  "bf16",
                           when(sym("checkpoint_format"),
                                "embeddings, norms, biases, the MoE router and the output layer are kept in 16-bit, "
                                "as the checkpoint stores them",
                                "embeddings, norms and output layer are kept in 16-bit"))),
                 when=both(_ON_GPU, sym("quantised"), negate(both(sym("kbit_fp32"),
                                                                   eq(sym("kbit_prepare"), "prepare")))),
                 sharded_by=sym("param_ranks")),
        PartRule("weights/unquantised_fp32", sym("kbit_fp32") * 4,
                 when(eq(sym("kbit_prepare"), "prepare"), "N_embeddings+norms+output layer x 4 B", "N_norms x 4 B"),
                 KBIT_PREPARE_SOURCE, per_param(4, "fp32"), KBIT_NOTE,
                 when=both(_ON_GPU, sym("quantised"), sym("kbit_fp32") > 0), sharded_by=sym("param_ranks")),
        # The adapters and their gradients in the adapters' dtype (builder.model.adapters.ADAPTER_DTYPE: fp32 under
        # PEFT, the model's own under torchtune), no master copy.
        PartRule("weights/lora_adapters", sym("adapters") / sym("param_ranks") * ADAPTER_BYTES,
                 "N_adapters x bytes(adapter dtype)", fmt("{0}; {1}", LORA, ADAPTER_SOURCE),
                 PerUnit(ADAPTER_BYTES, "adapter param", ADAPTER_DTYPE), when=both(TRAIN, sym("lora")),
                 sharded_by=sym("param_ranks")),
        PartRule("gradients", sym("adapters") / sym("grad_ranks") * ADAPTER_BYTES, "N_adapters x bytes(adapter dtype)",
                 fmt("{0}; {1}", LORA, ADAPTER_SOURCE),
                 PerUnit(ADAPTER_BYTES, "adapter param", ADAPTER_DTYPE,
                         fmt("{0} B/adapter param ({1}); frozen base weights get none", per_unit(ADAPTER_BYTES),
                             ADAPTER_DTYPE)),
                 when=both(TRAIN, sym("lora")), sharded_by=sym("grad_ranks")),
        PartRule("optimizer/master", sharded(sym("dense"), sym("expert"), sym("optimizer_ranks"),
                                             sym("expert_optimizer_ranks")) * bytes_of(sym("master_dtype")),
                 "N x bytes(master dtype)", when(SHARD_GRAD_OP_MIXED, FSDP_MIXED_SOURCE, MIXED),
                 PerUnit(bytes_of(sym("master_dtype")), "param",
                         when(SHARD_GRAD_OP_MIXED, fmt("{0} sharded flat parameter", sym("master_dtype")),
                              fmt("{0} master copy", sym("master_dtype")))),
                 when(SHARD_GRAD_OP_MIXED, "FSDP's sharded parameter, which the optimizer steps; counted with "
                                           "optimizer states, as ZeRO's K does",
                      "counted with optimizer states, as ZeRO's K does"),
                 # FSDP (but SHARD_GRAD_OP) keeps no master apart: its fp32 shard is the weights part.
                 when=both(PLAIN_STATES, sym("master_dtype"), ne(sym("master_dtype"), sym("param_dtype")),
                           negate(sym("fsdp_shard_is_master"))),
                 sharded_by=sym("optimizer_ranks")),
        # Megatron-LM with a 16-bit grad buffer (--fp16, or --bf16 --grad-reduce-in-bf16): the optimizer steps on an
        # fp32 copy of the gradients, of its shard of them with the distributed optimizer, made at the step and freed
        # by the next zero_grad (builder.model.gradbuffers; builder.model.step counts it from the optimizer step on).
        PartRule("optimizer/master_grads", sym("states_here") * 4, "N x 4 B", MASTER_GRADS,
                 PerUnit(4, "param", "fp32 copy of the gradients"),
                 fmt("made at the optimizer step from the {0} grad buffer, live to the next zero_grad; {1}",
                     sym("grad_dtype"), when(sym("optimizer_ranks") > 1,
                                             "the distributed optimizer copies only its shard",
                                             "every gradient, whole")),
                 when=both(PLAIN_STATES, sym("master_grads")), sharded_by=sym("optimizer_ranks")),
        PartRule("gradients", sym("grads_here") * bytes_of(sym("stored_grad_dtype")),
                 when(sym("fsdp_mixed"), "N x bytes(master dtype)", "N x bytes(grad dtype)"),
                 when(sym("host_grads_fp32"), OFFLOADED_GRADS,
                      when(DEEPSPEED_ZERO3, DEEPSPEED_ZERO3_GRADS,
                           when(sym("fsdp_mixed"), FSDP_MIXED_SOURCE, MIXED))),
                 per_param(bytes_of(sym("stored_grad_dtype")), sym("stored_grad_dtype")),
                 when=both(PLAIN_STATES, negate(sym("in_backward")), eq(sym("msamp_fp8_linear"), 0)),
                 sharded_by=sym("grad_ranks")),
        # MS-AMP: fp8 gradients for the FP8Linear weights (_FP8GemmFunction.backward casts wgrad to fp8 e4m3), the
        # declared dtype's for the rest.
        PartRule("gradients", sym("msamp_fp8_linear") * bytes_of(sym("grad_dtype"))
                 + (sym("grads_here") - sym("msamp_linear_here")) * bytes_of(sym("kept_grad_dtype")),
                 "N_linear x bytes(grad dtype) + (N - N_linear) x bytes(param dtype)", fmt("{0}; {1}", MSAMP, MSAMP_LINEAR),
                 fmt("{0} B/linear param ({1}), {2} B/other ({3})", per_unit(bytes_of(sym("grad_dtype"))),
                     sym("grad_dtype"), per_unit(bytes_of(sym("kept_grad_dtype"))), sym("kept_grad_dtype")),
                 when=both(PLAIN_STATES, negate(sym("in_backward")), sym("msamp_fp8_linear") > 0),
                 sharded_by=sym("grad_ranks")),
        # With the step inside backward each gradient is freed once its parameter is updated: one at a time.
        PartRule("gradients", sym("largest_tensor") / sym("grad_ranks") * bytes_of(sym("grad_dtype")),
                 "largest tensor x bytes(grad dtype)", IN_BACKWARD,
                 fmt("one tensor's ({0})", sym("grad_dtype")),
                 "simplification: the largest parameter's gradient, the one in flight at a time when the optimizer "
                 "steps inside backward",
                 when=both(PLAIN_STATES, sym("in_backward")), sharded_by=sym("grad_ranks")),
        PartRule("gradients/accumulation_buffer", sym("grads_here") * bytes_of(sym("grad_accum_dtype")),
                 "N x bytes(accumulation dtype)", fmt("{0}; {1}", BF16_OPTIMIZER, MAIN_GRAD),
                 per_param(bytes_of(sym("grad_accum_dtype")), sym("grad_accum_dtype")), KEPT_NOTE,
                 # FSDP's sharded gradients under mixed precision are already in the master dtype (stored_grad_dtype).
                 when=both(PLAIN_STATES, sym("grad_accum_dtype"),
                           ne(sym("grad_accum_dtype"), when(sym("fsdp_mixed"), sym("stored_grad_dtype"),
                                                            sym("grad_dtype"))),
                           negate(sym("zero3_accumulates"))),
                 sharded_by=sym("grad_ranks")),
        # PyTorch DDP's reducer buckets (builder.model.gradbuffers): a second copy of every gradient, unless the
        # gradients are views of them (gradient_as_bucket_view, then the gradients part is the buckets).
        PartRule("comm/ddp_buckets", sym("grads_here") * when(sym("lora"), ADAPTER_BYTES, bytes_of(sym("grad_dtype"))),
                 "N x bytes(grad dtype)", DDP_BUCKETS,
                 per_param(when(sym("lora"), ADAPTER_BYTES, bytes_of(sym("grad_dtype"))),
                           when(sym("lora"), ADAPTER_DTYPE, sym("grad_dtype"))),
                 fmt("{0}; param.grad is a separate copy (gradient_as_bucket_view=False)", KEPT_NOTE),
                 when=both(sym("ddp"), negate(sym("gradient_as_bucket_view")))),
        *_adam("m", "first moment", "exp_avg_state_dtype"), *_adam("v", "second moment", "exp_avg_sq_state_dtype"),
        PartRule("optimizer/momentum", sym("states_here") * bytes_of(sym("state_dtype")), "N x bytes(state dtype)",
                 when(eq(sym("optimizer"), "lion"), LION, SGD),
                 PerUnit(bytes_of(sym("state_dtype")), "param", fmt("{0} momentum", sym("state_dtype"))),
                 when=both(TRAIN, isin(sym("optimizer"), "sgd-momentum", "lion")), sharded_by=sym("optimizer_ranks")),
        PartRule("optimizer/adafactor_factors",
                 sym("states_here") * sym("adafactor_share") * bytes_of(sym("state_dtype")),
                 "sum over matrices of (rows + columns) x bytes; vectors in full", ADAFACTOR,
                 PerUnit(sym("adafactor_share") * bytes_of(sym("state_dtype")), "param",
                         words=fmt("{0} B/param", fixed(sym("adafactor_share") * bytes_of(sym("state_dtype")), 4))),
                 "no first moment (beta1 = None, the default); factors spread over GPUs in proportion to parameters",
                 when=both(TRAIN, eq(sym("optimizer"), "adafactor")), sharded_by=sym("optimizer_ranks")),
    ),
)

PIPELINED_FSDP = (Cite("pytorch-pipelining", "torch/distributed/pipelining/stage.py "
                       "_PipelineStageBase.backward_maybe_with_nosync") + " (an FSDP stage: "
                  "set_reshard_after_backward(False) and set_requires_gradient_sync(False) until its last backward); "
                  + Cite("torchtitan", "torchtitan/models/llama3/infra/parallelize.py")
                  + " (reshard_after_forward = not pp_enabled, the default policy)")
# FSDP under pipeline parallelism (torchtitan): a stage neither reshards its parameters after the forward nor after
# a backward until the schedule's last, and accumulates its unsharded gradients until then, so the whole stage's
# parameters and gradients are unsharded through the schedule.
WHOLE_STAGE = both(sym("pp") > 1, sym("fsdp"))
# FSDP gathers a unit's parameters for its forward and backward; DeepSpeed ZeRO-3 gathers module by module, with
# prefetching and reuse limits of its own (builder.model.zero3). A unit's gradients are whole until they are
# reduce-scattered.
_ZERO3_BYTES = bytes_of(sym("param_dtype"))
# A DeepSpeed bucket's gradients: the bucket, or the trainable parameters where fewer (builder.model.buckets).
_BUCKET_FILLED = when(sym("lora"), "min(reduce_bucket_size, N_adapters)", "min(reduce_bucket_size, N)")
# FSDP2's backward, read from PyTorch (_fsdp_param_group.py at 002a76f, _fsdp_collectives.py at 010ae4a): a unit's
# post_backward copies its unsharded gradients into a new reduce-scatter input of the reduce dtype (foreach_reduce),
# frees them, and keeps that input in comm_ctx.reduce_scatter_state until the next unit's post_backward waits on its
# event; so while a block's gradients are made (comm/unsharded_grads) the previous block's input is still live. The
# root unit (embeddings and output layer, builder.model.placement's root_unit) has no input that needs a gradient, so
# its post_backward runs in the root's final callback: the output layer's unsharded gradient, made at the start of
# backward, is live through every layer's backward. Full fine-tuning only (frozen weights make no gradients).
# FSDP reduce-scatters the gradients of a unit (or, under pipeline parallelism, of the stage) in the reduce dtype: a
# strategy that shards them (grad_ranks above 1: SHARD_GRAD_OP, FULL_SHARD, HYBRID_SHARD) over more than one rank.
FSDP_REDUCE_SCATTERS = both(TRAIN, sym("has_architecture"), sym("fsdp"), sym("shard_stage") >= 2, SHARD_GROUP > 1)
FSDP2_UNITS = both(FSDP_REDUCE_SCATTERS, negate(WHOLE_STAGE), eq(sym("lora_rank"), 0))
# The runs whose parts below read the reduce dtype (gradient_reduce_dtype, the reduce_dtype input where it is set):
# FSDP reduce-scattering full gradients (with LoRA adapters a unit's unsharded gradients are the adapters', counted in
# their own dtype) and DeepSpeed's ZeRO-3 (its reduce bucket and the reduce-scatter's flat copy, in
# communication_data_type). builder.model.checks refuses reduce_dtype in any other run: nothing there reads it.
READS_REDUCE_DTYPE = either(both(FSDP_REDUCE_SCATTERS, eq(sym("lora_rank"), 0)),
                            both(buckets.DEEPSPEED_ZERO, eq(sym("shard_stage"), 3)))
FSDP2_REDUCE_SCATTER = (Cite("pytorch-fsdp2", "_fsdp_param_group.py FSDPParamGroup.post_backward") + " and "
                        + Cite("pytorch-fsdp2", "_fsdp_collectives.py foreach_reduce")
                        + ": a block's reduce-scatter input, in the reduce dtype, lives until the next block's "
                        "post-backward")
FSDP2_REDUCE_SCATTER_NOTE = ("simplification: counted inside every layer's backward; at the last layer's, the first to "
                             "run, no block has been reduced yet, and the next layer's holds one with that layer's "
                             "saved tensors already freed")
FSDP2_ROOT = (Cite("pytorch-fsdp2", "_fsdp_state.py _root_post_backward_final_callback")
              + ": the root unit reduces its gradients only at the end of backward")
FSDP2_ROOT_NOTE = ("simplification: the root unit is the embeddings and the output layer (fully_shard on each block, "
                   "then on the model); the embedding's own gradient, made last, is counted at the end of backward "
                   "on its own")
# torchtune's custom_sharded_layers (builder.model.placement's embedding_unit and output_unit): the token embedding and
# the output layer as FSDP units of their own, with the blocks' reshard_after_forward (torchtune's shard_model passes
# the same to each). torchtitan's default policy reshards its tok_embeddings unit after the forward, not its norm and
# lm_head unit, and accelerate 1.15 wraps its tail so too (placement.SHARD_MODEL: any implementation but torchtune):
# that unit, the final norm with the output layer, stays gathered from its forward to the end of the final norm's
# backward (builder.model.step's AT_PHASE). Read in PyTorch 2.13 (torch/distributed/fsdp/_fully_shard): a unit's
# pre-forward hook gathers it (_fsdp_param_group.py FSDPParamGroup.pre_forward) and its post-forward frees it
# (post_forward, reshard); a hook on its outputs gathers it again in the backward (_fsdp_state.py _pre_backward,
# FSDPParamGroup.pre_backward), which also prefetches the unit that ran before it in the forward (_backward_prefetch:
# post_forward_order[index - 1]); the RegisterPostBackwardFunction on its forward inputs runs its post_backward once
# their gradient is made: the reduce-scatter, then the free (reshard_after_backward). So the output unit is gathered for
# its forward and its backward only, and its gradient is reduce-scattered when its backward ends, its reduce-scatter
# input live until the last block's post_backward; the embedding's input (token ids) needs no gradient, so its
# post_backward runs in the final callback, as the root's, with its gradient made last. torchtune's chunked loss calls
# the output layer once a chunk: each call gathers and frees it again, and its post_backward runs after every chunk's
# backward, but autograd sums the chunks' weight gradients in the AccumulateGrad node's input buffer and sets .grad only
# once every chunk's has come (torch/csrc/autograd/node.h: AccumulateGrad's sequence_nr is UINT64_MAX, so it runs as
# soon as it is ready), so only the last post_backward finds a gradient and reduce-scatters it: the chunks' sum
# (gradients/head_sum) is as without FSDP (measured on CPU with a fake process group: tests/test_fsdp_units.py).
CUSTOM_UNITS = (Cite("torchtune-shard-model", "torchtune/training/_distributed.py shard_model")
                + " (fully_shard on each module named in custom_sharded_layers, then each block, then the model); "
                + Cite("torchtitan-fsdp-b5bcd76", "torchtitan/distributed/fsdp.py apply_fsdp_to_decoder")
                + " (the final norm with the output layer, reshard_after_forward=False by default)")
FSDP2_GATHER = (Cite("pytorch-2-13", "torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py FSDPParamGroup."
                                     "pre_forward, post_forward and pre_backward")
                + ": a unit is gathered for its forward, freed after it, gathered again for its backward")
# What FSDP2 holds gathered, read in PyTorch 2.13 (torch/distributed/fsdp/_fully_shard) and measured on CPU with a fake
# process group (builder.validate.fsdp_units, tests/test_fsdp_units.py). A unit's all-gather fills one flat buffer
# (_fsdp_collectives.py foreach_all_gather: all_gather_output, world size x the unit's padded shard) and its copy-out
# splits it into the unsharded parameters (foreach_all_gather_copy_out into each FSDPParam's all_gather_outputs): two
# tensors of a unit's size. In the forward, wait_for_unshard keeps the buffer in comm_ctx.all_gather_state until the
# next unit's copy-out ("Defer free to allow for overlap of this copy-out with next all-gather collective"), or until
# the root's post-forward frees the last one (_fsdp_state.py _post_forward): inside a block's forward its parameters
# and its buffer. A block's post_forward frees its parameters (reshard_after_forward). The root unit is resharded
# after the forward too where fully_shard is called on it with reshard_after_forward=True, as torchtune's shard_model
# does (30b8519: fsdp_kwargs on every call, the model's too); fully_shard's default (reshard_after_forward=None) keeps
# the root gathered (_fsdp_state.py _lazy_init: post_forward_mesh_info = None), and accelerate 1.15's
# fsdp2_prepare_model leaves its root to that default ("Defer to PyTorch's reshard_after_forward=None heuristic"), as
# torchtitan does. In the backward a unit's pre_backward (a hook on its forward outputs; the root's on the model's
# outputs: the logits, or with transformers' loss in the forward the loss) gathers it, frees the buffer once copied
# out and prefetches the unit before it in the forward (_backward_prefetch: post_forward_order[index - 1]): the buffer
# then is that unit's, until its own pre_backward. The first block's prefetches none (index 0), or the token
# embedding's unit where it is one of its own.
FSDP2_GATHERED = (Cite("pytorch-2-13", "torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py FSDPParamGroup."
                                       "pre_forward, post_forward, pre_backward and _backward_prefetch")
                  + ": a unit is gathered for its forward, freed after it, gathered again for its backward, the one "
                    "before it prefetched; "
                  + Cite("torchtune-shard-model", "torchtune/training/_distributed.py shard_model")
                  + ": reshard_after_forward passed to the root unit too; "
                  + Cite("accelerate-1-15", "src/accelerate/utils/fsdp_utils.py fsdp2_prepare_model")
                  + ": the root left to fully_shard's default, which keeps it gathered after the forward")
FSDP2_ALL_GATHER_OUTPUT = (Cite("pytorch-2-13", "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py "
                                                "foreach_all_gather and _fsdp_param_group.py wait_for_unshard")
                           + ": the flat all-gather output, kept in the forward until the next unit's copy-out; in the "
                             "backward the prefetched unit's; measured on CPU with a fake process group")
FSDP2_EMBEDDING_GRADS = (Cite("pytorch-2-13", "torch/distributed/fsdp/_fully_shard/_fsdp_state.py "
                                              "_root_post_backward_final_callback")
                         + ": a unit whose forward inputs need no gradient (the token ids: the root, or the token "
                         "embedding's own unit) reduces its gradients in the final callback")
FSDP2_OUTPUT_REDUCE = (Cite("pytorch-2-13", "torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py "
                                            "FSDPParamGroup.post_backward")
                       + " (run by RegisterPostBackwardFunction on the unit's forward inputs) and _fsdp_collectives.py "
                       "foreach_reduce: the output layer's gradient copied into a reduce-scatter input when its "
                       "backward ends, kept until the next unit's post_backward")
ZERO3_NOTE = ("simplification: DeepSpeed prefetches whole parameters, so a prefetch can pass the bucket by up to one "
              "parameter (left out), and the largest module's bias is left out")
ZERO3_KEPT_NOTE = ("simplification: whole blocks from the last, the block that half the reuse distance falls in "
                   "counted whole; held from the last layer's forward to its backward")
def _own_unit_gathered(name: str, unit: str, what: str, note: str) -> PartRule:
    """A module FSDP wraps as a unit of its own (torchtune's custom_sharded_layers; CUSTOM_UNITS), gathered in the
    parameter dtype: the symbol `unit` holds its parameters."""
    return PartRule(name, sym(unit) * bytes_of(sym("param_dtype")), f"{what} x bytes(param dtype)",
                    fmt("{0}; {1}", FSDP2_GATHER, CUSTOM_UNITS), fmt(f"the {what}'s unit ({{0}})", sym("param_dtype")),
                    note, when=both(TRAIN, sym("has_architecture"), sym("param_ranks") > 1, sym("fsdp"),
                                    negate(WHOLE_STAGE), sym(unit) > 0))


# QLoRA under FSDP: what is gathered is the 4-bit weight as it is stored, not a 16-bit copy.
# torchtune (torchao's NF4Tensor; torchao/dtypes/nf4tensor.py at v0.5.0, the torchao of torchtune's README commit
# 30b8519): NF4Tensor.fsdp_pre_all_gather returns (quantized_scalers, quantization_factor, quantized_data), the
# sharded uint8 codes (0.5 B a weight), int8 scalers (one per 64) and the weight-dtype quantization factors (one per
# 256 scalers), scaler_mean and the nf4 table travelling as metadata; fsdp_post_all_gather wraps the all-gather
# outputs in an NF4Tensor (with out= it asserts the storages are the all-gather outputs'): no copy. FSDP2 gathers a
# unit whose inputs differ in dtype as bytes (PyTorch 2.13 _fsdp_collectives.py _get_all_gather_input_metadatas: uint8),
# so a block's flat all-gather buffer and its copied-out parameters both hold its NF4 weights at 0.5 B + the constants
# (builder.model.states' constant_bytes), its norms and LoRA adapters (FSDP units of the block: torchtune's
# shard_model wraps each layer) at their own dtype.
# PEFT with bitsandbytes (implementation hf; PEFT docs/source/accelerate/fsdp.md: bnb_4bit_quant_storage bf16, the
# model loaded in that dtype): Params4bit packs four 4-bit codes into each bf16 element (quantize_4bit's
# quant_storage), a tensor of N/4 elements, 0.5 B a weight, which FSDP shards and gathers as any bf16 parameter; its
# quant_state (absmax, double-quantised codes and constants) is a Python attribute of the parameter and of the
# Linear4bit module, neither a parameter nor a buffer, so FSDP neither shards nor gathers it
# (bitsandbytes/nn/modules.py fix_4bit_weight_quant_state_from_module restores it from module.quant_state after
# FSDP has replaced the parameter): every rank holds all of it (weights/quantisation_constants, not sharded). PEFT's
# fsdp_auto_wrap_policy wraps the trainable LoRA layers as units of their own, so the block gathers no adapters.
QLORA_FSDP_GATHER = when(TORCHTUNE,
                         Cite("torchao-nf4", "torchao/dtypes/nf4tensor.py NF4Tensor.fsdp_pre_all_gather and "
                                             "fsdp_post_all_gather")
                         + ": the 4-bit codes, int8 scalers and quantization factors gathered, the unsharded weight "
                           "an NF4Tensor over the all-gather outputs (no copy); "
                         + Cite("pytorch-2-13", "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py "
                                                "_get_all_gather_input_metadatas")
                         + " (inputs of mixed dtypes gathered as bytes)",
                         Cite("bitsandbytes-95f9af3", "bitsandbytes/functional.py quantize_4bit and nn/modules.py "
                                                      "Params4bit")
                         + " (quant_storage bf16: four 4-bit codes to a bf16 element, gathered as a bf16 parameter); "
                         + Cite("peft-fsdp-qlora", "docs/source/accelerate/fsdp.md")
                         + " (bnb_4bit_quant_storage bf16 for FSDP-QLoRA; fsdp_auto_wrap_policy: the adapters units "
                           "of their own)")
# Bytes a gathered 4-bit linear weight takes: the codes and, with torchao, the constants that travel with them.
QLORA_GATHERED_BYTES = when(TORCHTUNE, sym("quantised_bytes") + sym("constant_bytes"), sym("quantised_bytes"))
_PARAM_BYTES = bytes_of(sym("param_dtype"))
def _gathered(linear: Expr, whole: Expr, adapters: Expr) -> Expr:
    """Bytes FSDP holds gathered for `whole` parameters of which `linear` are linear weights: under QLoRA those 4-bit
    as stored (QLORA_GATHERED_BYTES), the rest (norms) in the param dtype and, with torchtune, the `adapters` in
    theirs; otherwise every parameter in the param dtype."""
    return when(sym("qlora"),
                linear * QLORA_GATHERED_BYTES + (whole - linear) * _PARAM_BYTES
                + when(TORCHTUNE, adapters * ADAPTER_BYTES, 0),
                whole * _PARAM_BYTES)


QLORA_GATHER = {
    **{name: QUANTISATION[name] for name in ("checkpoint_format", "block_scaled", "quantised_bytes", "constant_bytes")},
    "layer_adapters": LAYER_ADAPTERS,
    # One block as FSDP gathers it, and the whole stage (pipeline parallelism keeps it gathered).
    "gathered_block": _gathered(sym("layer_linear"), sym("layer_unit"), sym("layer_adapters")),
    "gathered_stage": _gathered(sym("linear"), sym("stage_unsharded"), sym("adapters")),
}
QLORA_BLOCK_WORDS = fmt("one block's 4-bit linear weights x {0} B + its norms{1} x their bytes",
                        per_unit(QLORA_GATHERED_BYTES), when(TORCHTUNE, " and adapters", ""))

COMM = RuleSet(
    # The stage's LoRA adapters, derived here as the model states derive them (one rule: a widget's specialised rules
    # simplify it as one symbol, builder.widgets.specialise.one_valued).
    symbols={**SHARDING, "adapters": ADAPTERS["adapters"], "lora": ADAPTERS["lora"],
             "gradient_reduce_dtype": when(sym("reduce_dtype"), sym("reduce_dtype"), sym("grad_dtype")),
             "stage_unsharded": sym("dense") + sym("expert"), **QLORA_GATHER, **ZERO3_SYMBOLS, **buckets.SYMBOLS,
             # The weights FSDP gathers in float8 (enable_fsdp_float8_all_gather) and how many: the converted ones of
             # the block computed (the whole stage under pipeline parallelism), and the output layer's where it is
             # converted (a tied one is refused); the all-gather buffer's block: comm/all_gather_output.
             "float8_head_weight": when(both(FLOAT8_HEAD, sym("stage_has_head"), negate(sym("tied_embeddings"))),
                                        sym("vocab_rows"), 0),
             "float8_gathered": when(FLOAT8_ALL_GATHER, when(WHOLE_STAGE, sym("stage_layers"), 1)
                                     * sym("layer_float8") + sym("float8_head_weight"), 0),
             "float8_gathered_weights": when(FLOAT8_ALL_GATHER, when(WHOLE_STAGE, sym("stage_layers"), 1)
                                             * sym("layer_float8_tensors") + when(sym("float8_head_weight"), 1, 0), 0)},
    parts=(
        PartRule("comm/gathered_params", sym("zero3_now") * _ZERO3_BYTES,
                 "(small parameters + largest layer + prefetch) x bytes(param dtype)",
                 f"{ZERO3_COORDINATOR}; {ZERO3_ESTIMATOR}", "largest layer + prefetch + small parameters",
                 fmt("{0}{1}", sym("zero3_assumed"), ZERO3_NOTE), when=sym("zero3_gathers")),
        PartRule("comm/reused_params", (sym("zero3_turn") - sym("zero3_now")) * _ZERO3_BYTES,
                 "modules used again within stage3_max_reuse_distance x bytes(param dtype)", ZERO3_COORDINATOR,
                 "the last blocks, kept for their backward", fmt("{0}{1}", sym("zero3_assumed"), ZERO3_KEPT_NOTE),
                 when=both(sym("zero3_gathers"), sym("zero3_turn") > sym("zero3_now"))),
        # torchao's float8 all-gather (builder.model.float8): the converted weights gathered in float8, 1 B each, with
        # an fp32 scale a weight. FSDP unit by unit: the unsharded parameters of the block computed and of the root
        # unit; the flat buffer one all-gather fills is comm/all_gather_output (FSDP2_GATHERED); which of them are
        # live at each moment of a step is builder.model.step's (AT_PHASE).
        # QLoRA: the block's (or stage's) 4-bit weights as they are stored (QLORA_GATHER), the rest as before.
        PartRule("comm/gathered_params",
                 when(WHOLE_STAGE, sym("gathered_stage"), sym("gathered_block") + sym("fsdp_root") * _PARAM_BYTES)
                 - sym("float8_gathered") * (bytes_of(sym("param_dtype")) - 1) + 4 * sym("float8_gathered_weights"),
                 when(sym("qlora"),
                      when(WHOLE_STAGE, fmt("the stage's 4-bit linear weights x {0} B + its other parameters x their "
                                            "bytes", per_unit(QLORA_GATHERED_BYTES)),
                           fmt("{0} + root unit x bytes(param dtype)", QLORA_BLOCK_WORDS)),
                      fmt("{0}{1}", when(WHOLE_STAGE, "the stage's parameters x bytes(param dtype)",
                                         "(one block + root unit) x bytes(param dtype)"),
                          when(FLOAT8_ALL_GATHER, ", the float8 layers' weights at 1 B with a 4 B scale each", ""))),
                 fmt("{0}{1}{2}", when(WHOLE_STAGE, PIPELINED_FSDP,
                                       fmt("{0}; {1}{2}", FSDP, FSDP2_GATHERED,
                                           when(sym("custom_sharded_layers"), fmt("; {0}", CUSTOM_UNITS), ""))),
                     when(FLOAT8_ALL_GATHER, "; " + FLOAT8_GATHERED, ""),
                     when(sym("qlora"), fmt("; {0}", QLORA_FSDP_GATHER), "")),
                 fmt("{0}{1}", when(WHOLE_STAGE, "the whole stage", "1 block + root unit"),
                     when(FLOAT8_ALL_GATHER, ", linear weights in float8",
                          when(sym("qlora"), ", linear weights 4-bit", ""))),
                 when(WHOLE_STAGE, "pipeline parallelism keeps the stage's parameters unsharded through the schedule",
                      fmt("the unsharded parameters of the block being computed and of the root unit ({0}); with "
                          "torchtune the root unit is resharded after the forward and gathered again when the "
                          "backward reaches the model's outputs",
                          when(both(sym("embedding_unit"), sym("output_unit")),
                               when(SHARD_MODEL, "the final norm: the token embedding and the output layer are units "
                                                 "of their own",
                                    "learned position embeddings only, if any: the token embedding, and the final "
                                    "norm with the output layer, are units of their own"),
                               when(sym("embedding_unit"), "final norm, head: the token embedding is a unit of its own",
                                    when(sym("output_unit"),
                                         when(SHARD_MODEL, "embeddings, final norm: the output layer is a unit of its "
                                                           "own",
                                              "embeddings: the final norm with the output layer is a unit of its own"),
                                         "embeddings, head"))))),
                 when=both(TRAIN, sym("has_architecture"), sym("param_ranks") > 1, sym("fsdp"))),
        PartRule("comm/all_gather_output", sym("gathered_block")
                 - when(FLOAT8_ALL_GATHER, sym("layer_float8") * (bytes_of(sym("param_dtype")) - 1)
                        - 4 * sym("layer_float8_tensors"), 0),
                 when(sym("qlora"), QLORA_BLOCK_WORDS,
                      fmt("one block x bytes(param dtype){0}",
                          when(FLOAT8_ALL_GATHER, ", the float8 layers' weights at 1 B with a 4 B scale each", ""))),
                 fmt("{0}{1}{2}", FSDP2_ALL_GATHER_OUTPUT, when(FLOAT8_ALL_GATHER, "; " + FLOAT8_GATHERED, ""),
                     when(sym("qlora"), fmt("; {0}", QLORA_FSDP_GATHER), "")),
                 when(sym("qlora"), "1 block's all-gather output, linear weights 4-bit", "1 block's all-gather output"),
                 "in the forward the block's own, kept until the next unit's copy-out; in the backward the block "
                 "before it, prefetched",
                 when=both(TRAIN, sym("has_architecture"), sym("param_ranks") > 1, sym("fsdp"), negate(WHOLE_STAGE))),
        PartRule("comm/unsharded_grads", when(WHOLE_STAGE, sym("stage_unsharded"), sym("layer_unit"))
                 * bytes_of(sym("gradient_reduce_dtype")),
                 when(WHOLE_STAGE, "the stage's gradients x bytes(reduce dtype)",
                      "one block's gradients x bytes(reduce dtype)"),
                 when(WHOLE_STAGE, PIPELINED_FSDP, FSDP),
                 when(WHOLE_STAGE, fmt("the whole stage ({0})", sym("gradient_reduce_dtype")),
                      fmt("1 block ({0})", sym("gradient_reduce_dtype"))),
                 when(WHOLE_STAGE, "pipeline parallelism accumulates the stage's unsharded gradients until the last "
                                   "backward", "simplification: one unit's full gradients before its reduce-scatter"),
                 when=both(FSDP_REDUCE_SCATTERS, eq(sym("lora_rank"), 0))),
        # With LoRA the frozen weights make no gradients: a unit's unsharded gradients are its adapters' (in the
        # adapters' dtype, as the 'gradients' part has them), a block's share of the stage's adapters.
        PartRule("comm/unsharded_grads", when(WHOLE_STAGE, sym("adapters"), sym("layer_adapters")) * ADAPTER_BYTES,
                 when(WHOLE_STAGE, "the stage's adapter gradients x bytes(adapter dtype)",
                      "one block's adapter gradients x bytes(adapter dtype)"),
                 when(WHOLE_STAGE, PIPELINED_FSDP, FSDP),
                 when(WHOLE_STAGE, fmt("the stage's adapters ({0})", ADAPTER_DTYPE),
                      fmt("1 block's adapters ({0})", ADAPTER_DTYPE)),
                 "frozen base weights make no gradients; simplification: one unit's adapter gradients before its "
                 "reduce-scatter",
                 when=both(FSDP_REDUCE_SCATTERS, sym("lora_rank") > 0)),
        # FSDP2 (fully_shard) keeps a unit's reduce-scatter input until the next unit's post_backward, and the root
        # unit's gradients (its post_backward runs in the final callback) until the end of backward.
        PartRule("comm/reduce_scatter_input", sym("layer_unit") * bytes_of(sym("gradient_reduce_dtype")),
                 "one block's gradients x bytes(reduce dtype)", FSDP2_REDUCE_SCATTER,
                 fmt("the previous block's ({0})", sym("gradient_reduce_dtype")), FSDP2_REDUCE_SCATTER_NOTE,
                 when=FSDP2_UNITS),
        PartRule("comm/root_grads", when(sym("stage_has_head"), sym("vocab_rows"), 0) * bytes_of(sym("param_dtype")),
                 "output layer's gradient x bytes(param dtype)", FSDP2_ROOT,
                 fmt("the output layer's unsharded gradient ({0})", sym("param_dtype")),
                 when(sym("embedding_unit"), "simplification: the root unit is the final norm and the output layer "
                                             "(the token embedding is a unit of its own)", FSDP2_ROOT_NOTE),
                 when=both(FSDP2_UNITS, sym("stage_has_head"), sym("stage_has_embedding"), eq(sym("output_unit"), 0))),
        # Units of their own (torchtune's custom_sharded_layers; CUSTOM_UNITS above): the output layer gathered for its
        # backward and its gradient's reduce-scatter input, the token embedding gathered for its backward (prefetched
        # during the first block's; its gradient, made last, is builder.model.step's transient).
        _own_unit_gathered("comm/gathered_output", "output_unit", "output layer",
                           when(SHARD_MODEL,
                                "gathered for its forward and for its backward only (with torchtune's chunked loss "
                                "once a chunk); counted at the output layer's backward (a moment of the step with "
                                "torchtune's chunked loss) and forward (with a float8 output layer)",
                                "with the final norm (torchtitan's and accelerate's layout), not resharded after its "
                                "forward: gathered from its forward through the loss to the end of the final norm's "
                                "backward; counted at the end of forward, the start of backward, the output layer's "
                                "forward and backward, and the final norm's backward")),
        PartRule("comm/output_reduce_scatter_input", sym("output_unit") * bytes_of(sym("gradient_reduce_dtype")),
                 "output layer's gradient x bytes(reduce dtype)", fmt("{0}; {1}", FSDP2_OUTPUT_REDUCE, CUSTOM_UNITS),
                 fmt("the output layer's ({0})", sym("gradient_reduce_dtype")),
                 when(SHARD_MODEL,
                      "made when the output layer's backward ends, freed at the last block's post-backward: counted "
                      "in the last layer's backward",
                      "made when the final norm's backward ends, with the norm's gradient, freed at the last block's "
                      "post-backward: counted in the last layer's backward; simplification: at the final norm's "
                      "backward it stands for the output layer's unsharded gradient (bytes equal where the reduce "
                      "dtype is the parameter dtype)"),
                 when=both(FSDP2_UNITS, sym("output_unit") > 0)),
        _own_unit_gathered("comm/gathered_embeddings", "embedding_unit", "token embedding",
                           "gathered for its forward and for its backward only, prefetched during the first block's "
                           "backward (the all-gather buffer then is its own): counted there and at the end of "
                           "backward"),
        # DeepSpeed ZeRO reduces gradients through buckets of its own size (builder.model.buckets).
        PartRule("comm/unsharded_grads", buckets.STAGE12_ELEMENTS * bytes_of(sym("param_dtype")),
                 when(sym("ds_contiguous"),
                      when(sym("ds_overlap"), "2 x reduce_bucket_size x bytes(param dtype)",
                           "reduce_bucket_size x bytes(param dtype)"),
                      fmt("2 x {0} x bytes(param dtype)", _BUCKET_FILLED)),
                 when(sym("ds_contiguous"), f"{buckets.STAGE12_SOURCE}; {buckets.CONFIG_SOURCE}",
                      f"{buckets.STAGE12_FLAT_SOURCE}; {buckets.CONFIG_SOURCE}"),
                 when(sym("ds_contiguous"),
                      when(sym("ds_overlap"), "2 buffers of reduce_bucket_size", "1 buffer of reduce_bucket_size"),
                      "a bucket's gradients and their flat copy"),
                 when(sym("ds_contiguous"),
                      "allocated whole, whatever the model's size, at the backward's first gradient and freed at its "
                      "end; the double buffer is overlap_comm's",
                      "without contiguous_gradients each gradient stays its own tensor until its bucket is reduced, "
                      "and the reduction copies the bucket into one flat tensor"),
                 when=both(sym("deepspeed_zero"), sym("shard_stage") < 3, buckets.STAGE12_ELEMENTS > 0)),
        PartRule("comm/unsharded_grads", buckets.STAGE3_BACKWARD * bytes_of(sym("gradient_reduce_dtype")),
                 fmt("{0}{1} x bytes(reduce dtype)", when(sym("ds_contiguous"), "", "2 x "), _BUCKET_FILLED),
                 buckets.REDUCE_SCATTER_SOURCE,
                 fmt("one bucket's gradients ({0})", sym("gradient_reduce_dtype")),
                 when(sym("ds_contiguous"), "the reduce-scatter's flat copy of a bucket",
                      "a bucket's gradients as their own tensors and the reduce-scatter's flat copy of them"),
                 when=both(sym("deepspeed_zero"), eq(sym("shard_stage"), 3), buckets.STAGE3_BACKWARD > 0)),
        PartRule("comm/reduce_bucket", buckets.STAGE3_HELD * bytes_of(sym("gradient_reduce_dtype")),
                 "reduce_bucket_size x bytes(reduce dtype)", f"{buckets.STAGE3_SOURCE}; {buckets.CONFIG_SOURCE}",
                 fmt("1 buffer of reduce_bucket_size ({0})", sym("gradient_reduce_dtype")),
                 "allocated at the optimizer's start and held at every moment of the step",
                 when=both(sym("deepspeed_zero"), eq(sym("shard_stage"), 3), buckets.STAGE3_HELD > 0)),
    ),
)

# Offloaded weights (ZeRO-Infinity / FSDP CPU offload of parameters) live in host memory, one copy per GPU.
HOST = RuleSet(
    symbols=SHARDING,
    # FSDP's offloaded parameters under mixed precision are its fp32 shards (FSDP_MIXED_SOURCE).
    parts=(PartRule("weights", (sym("dense") / sym("param_ranks") + sym("expert") / sym("expert_param_ranks"))
                    * bytes_of(when(FSDP_SHARD_IS_MASTER, sym("master_dtype"), sym("param_dtype"))),
                    when(FSDP_SHARD_IS_MASTER, "N_gpu x bytes(master dtype)", "N_gpu x bytes(param dtype)"),
                    when(FSDP_SHARD_IS_MASTER, fmt("{0}; {1}", OFFLOAD, FSDP_MIXED_SOURCE), OFFLOAD), "on the host",
                    when=isin(sym("offload"), "params", "both")),),
)
