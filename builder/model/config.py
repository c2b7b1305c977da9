"""The one configuration object the memory model reads.

A frozen dataclass, one option per line with what it means and its default's reason
(nanoGPT-style). `validate_config` checks ranges up front and names the option at fault.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from builder.model.architecture import Architecture
from builder.model.cite import Cite
from builder.model.checks import first_refusal
from builder.model.expr import evaluate
from builder.model.placement import CUSTOM_SHARDED_LAYERS
from builder.model.float8 import RECIPES as FLOAT8_RECIPES
from builder.model.overrides import CHOSEN, POLICY, POLICY_OVERRIDES, RULES as OVERRIDE_RULES
from builder.model.serving import CHOSEN_WEIGHTS
from builder.model.units import DTYPE_BYTES

MODES = ("train", "serve")
# The scale layouts of fp8 weights quantised at load (Config.weight_scales; builder.model.serving ONLINE_FP8_SCALES).
WEIGHT_SCALES = ("block", "channel")
# paged-adamw and paged-adamw8bit: bitsandbytes' PagedAdamW (fp32 states) and PagedAdamW8bit (Hugging Face's
# optim="paged_adamw_32bit" and "paged_adamw_8bit"), whose states live in CUDA unified memory (builder.model.paging).
OPTIMIZERS = ("adamw", "adam", "adam8bit", "paged-adamw", "paged-adamw8bit", "adamw8bit-torchao", "adamw4bit",
              "adamwfp8", "sgd", "sgd-momentum", "adafactor", "lion")
# How the optimizer's step runs (None: what the framework builds, else the optimizer's own default,
# builder.model.optimizers' DEFAULT_IMPL). torch.optim:
# 'for-loop' (foreach=False), 'foreach' (the default on CUDA for Adam, AdamW and SGD,
# torch/optim/optimizer.py _default_to_fused_or_foreach), 'fused' (fused=True, one kernel per group) or
# 'in-backward' (a per-parameter optimizer stepped from register_post_accumulate_grad_hook, each gradient freed
# at once: the PyTorch tutorial "How to save memory by fusing the optimizer step into the backward pass").
OPTIMIZER_IMPLS = ("for-loop", "foreach", "fused", "in-backward")
# How the language-model loss is computed (builder.model.oplists' loss rows, builder.model.step's transients):
# 'eager' (transformers ForCausalLMLoss: logits.float() then cross_entropy), 'compiled' (the same under
# torch.compile, which fuses the upcast and log-softmax), 'chunked' (torchtune CEWithChunkedOutputLoss, 8 chunks),
# 'chunked-compiled' (the same with each chunk's upcast and cross-entropy under torch.compile, as torchtune's
# training.compile_loss does when compile=True) or 'fused-linear' (Liger Kernel's fused linear cross-entropy: no
# logits at all).
LOSSES = ("eager", "compiled", "chunked", "chunked-compiled", "fused-linear")
# How a checkpoint is saved between steps (builder.model.checkpoint; "none": no save moment in the step), in each
# framework's words: torch.save of the state dicts, FSDP's StateDictType.FULL_STATE_DICT (FullStateDictConfig's
# defaults, or offload_to_cpu and rank0_only), SHARDED_STATE_DICT, torch.distributed.checkpoint (dcp) of FSDP2's
# sharded state dict, DeepSpeed's save_checkpoint, and with stage3_gather_16bit_weights_on_model_save.
CHECKPOINT_SAVES = ("none", "torch-save", "full-state-dict", "full-state-dict-offload", "sharded-state-dict", "dcp",
                    "deepspeed", "deepspeed-16bit")
# Recomputation modes, each in its framework's words: 'selective' is Megatron-LM's (the attention core recomputed),
# 'full' keeps each layer's input only, 'selective-op' is torchtitan's per-op selective activation checkpointing
# (SelectiveAC in torchtitan/distributed/activation_checkpoint.py at b5bcd76; activation_checkpoint.mode = selective
# with selective_ac_option = op in older releases): every layer checkpointed, the outputs of its listed ops kept.
RECOMPUTE = ("none", "selective", "full", "selective-op")
# The modes that wrap every layer in a checkpoint (the layer's input kept, the layer recomputed in its backward).
CHECKPOINTING = ("full", "selective-op")
ATTENTION = ("eager", "sdpa", "flash")
ACTIVATION_FORMULAS = ("ops", "korthikanti")
IMPLEMENTATIONS = ("hf", "megatron", "torchtune")
FSDP_STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD")
# The modules FSDP may wrap as units of their own (torchtune's custom_sharded_layers): builder.model.placement's
# CUSTOM_SHARDED_LAYERS.
PIPELINE_SCHEDULES = ("1f1b", "interleaved")
OFFLOAD = ("none", "optimizer", "params", "both")
# The projections of every block an adapter can target, then the output layer by PEFT's target name (lm_head:
# builder.model.adapters.HEAD).
LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down", "lm_head")
# What a QLoRA run does to the parameters bitsandbytes leaves unquantised (embeddings, norms, output layer):
# none keeps them in the model's 16-bit dtype (get_peft_model alone; TRL's SFTTrainer from v0.26.0);
# prepare is PEFT's prepare_model_for_kbit_training (peft/utils/other.py: every fp16/bf16 parameter that is not
# Params4bit cast to fp32); prepare-bf16 is that followed by the embeddings and the output layer cast back to bf16,
# the norms left in fp32 (artidoro/qlora qlora.py with --bf16; TRL's peft_module_casting_to_bf16 up to v0.25).
KBIT_PREPARE = ("none", "prepare", "prepare-bf16")


@dataclass(frozen=True)
class PrecisionPolicy:
    """Which dtype each model state is kept in."""

    name: str
    param: str  # weights used in forward/backward
    master: str | None  # separate high-precision copy updated by the optimizer (None: no copy)
    grad: str  # gradients as produced by backward
    optimizer_state: str  # Adam m/v, momentum, ...
    activation: str  # activations saved for backward
    description: str = ""
    source: str = ""  # text citing its works as Cite(key, locator) (builder.model.cite)
    autocast: bool = False  # torch.autocast: each linear layer casts its weight and saves the copy for backward
    recipe: str = ""  # a low-precision training recipe (builder.model.recipes.RECIPES), "" for none
    quantised_params: bool = False  # the recipe's linear weights are stored only quantised (TE quantized_model_init)
    exp_avg: str | None = None  # Adam's first moment (torch's exp_avg), when not optimizer_state
    exp_avg_sq: str | None = None  # Adam's second moment (torch's exp_avg_sq), when not optimizer_state
    msamp: bool = False  # MS-AMP's own optimizer (LBAdam/LBAdamW) steps: Adam or AdamW only, one parameter at a time
    # Megatron-LM's DDP keeps the gradients in one contiguous buffer (main_grad) allocated at model wrap, live through
    # every step (builder.model.gradbuffers)
    grad_buffer: bool = False


# Named policies. Sources: Micikevicius et al. 2017 (arXiv:1710.03740) section 3;
# Rajbhandari et al. 2019 (ZeRO, arXiv:1910.02054) section 3.1 (2+2+12 bytes);
# Megatron-LM theoretical_memory_usage.py (fp32 main_grad: 18 bytes/param without the
# distributed optimizer); PyTorch torch.autocast (fp32 params and grads, bf16 compute).
PRECISIONS: dict[str, PrecisionPolicy] = {
    p.name: p
    for p in (
        PrecisionPolicy("bf16-mixed", "bf16", "fp32", "bf16", "fp32", "bf16",
                        "bf16 weights and gradients, fp32 master copy and optimizer states",
                        Cite("rajbhandari2019", "section 3.1") + ": 2+2+12 bytes per parameter"),
        PrecisionPolicy("fp16-mixed", "fp16", "fp32", "fp16", "fp32", "fp16",
                        "fp16 weights and gradients, fp32 master copy and optimizer states",
                        Cite("micikevicius2017", "section 3") + "; " + Cite("rajbhandari2019", "section 3.1")),
        PrecisionPolicy("megatron-bf16", "bf16", "fp32", "fp32", "fp32", "bf16",
                        "bf16 weights, fp32 gradient buffer (main_grad), fp32 master and states",
                        Cite("megatron-memory", "megatron/training/theoretical_memory_usage.py")
                        + ": 18 bytes/param without distributed optimizer", grad_buffer=True),
        # Transformer Engine's low-precision recipes as Megatron-LM runs them (builder.model.recipes): Megatron's
        # bf16 weights, fp32 main_grad, fp32 master and states, plus the quantised copies the recipe keeps.
        *(PrecisionPolicy(name, "bf16", "fp32", "fp32", "fp32", "bf16", description, source, recipe=recipe,
                          quantised_params=params, grad_buffer=True)
          for name, recipe, params, description, source in (
              ("te-fp8", "te-fp8", False,
               "Megatron bf16 states plus Transformer Engine fp8 copies of the linear weights (delayed scaling)",
               Cite("te-d0067d0", "transformer_engine/pytorch/module/linear.py") + " (quantised weight workspace); "
               + Cite("megatron-d98e8a6", "--fp8-format")),
              ("te-fp8-params", "te-fp8", True,
               "fp8 linear weights only (no bf16 copy), fp32 master, fp32 main_grad and states",
               Cite("te-d0067d0", "quantized_model_init") + "; " + Cite("megatron-d98e8a6", "--fp8-param-gather")),
              ("te-mxfp8", "te-mxfp8", False,
               "Megatron bf16 states plus Transformer Engine MXFP8 copies of the linear weights (Blackwell)",
               Cite("te-d0067d0", "MXFP8BlockScaling, mxfp8_tensor.py") + "; " + Cite("megatron-d98e8a6", "--fp8-recipe mxfp8")),
              ("te-nvfp4", "te-nvfp4", False,
               "Megatron bf16 states plus Transformer Engine NVFP4 copies of the linear weights (Blackwell)",
               Cite("te-d0067d0", "NVFP4BlockScaling, nvfp4_tensor.py") + "; " + Cite("megatron-d98e8a6", "--fp4-format e2m1")),
          )),
        # Megatron-LM --fp16 (without --accumulate-allreduce-grads-in-fp32): the main_grad buffer is fp16, and the
        # optimizer steps on an fp32 copy of it (distrib_optimizer.py _copy_model_grads_to_main_grads:
        # shard_main_param.grad = shard_model_grad.float()): 20 bytes/param, 4 + 16/d with the distributed optimizer
        # (Megatron-LM docs/user-guide/features/dist_optimizer.md).
        PrecisionPolicy("megatron-fp16", "fp16", "fp32", "fp16", "fp32", "fp16",
                        "fp16 weights and main_grad buffer, fp32 master, fp32 copy of the gradients at the step, "
                        "fp32 states",
                        Cite("megatron-dist-optimizer", "docs/user-guide/features/dist_optimizer.md")
                        + ": 20 bytes/param, 4 + 16/d distributed", grad_buffer=True),
        # MS-AMP O2 (Peng et al. 2023, FP8-LM, arXiv:2310.18313, section 2.2; MS-AMP msamp/__init__.py initialize,
        # opt_level 'O2'): fp16 weights (msamp.nn.LinearReplacer, ScalingTensor with a per-tensor scale) with no
        # separate master copy, fp8 weight gradients, LBAdamW's first moment fp8 (exp_avg_dtype=torch.uint8) and
        # second moment fp16 (exp_avg_sq_dtype=torch.float16): 2 + 1 + 1 + 2 = 6 bytes/param.
        PrecisionPolicy("msamp-o2", "fp16", None, "fp8", "fp32", "fp16",
                        "MS-AMP O2: fp16 weights, fp8 gradients, fp8 first moment and fp16 second moment",
                        Cite("peng2023fp8lm", "section 2.2") + "; "
                        + Cite("msamp", "msamp/__init__.py, msamp/optim/adamw_base.py"), exp_avg="fp8", exp_avg_sq="fp16", msamp=True),
        PrecisionPolicy("amp-bf16", "fp32", None, "fp32", "fp32", "bf16",
                        "fp32 weights and gradients, bf16 autocast activations, no separate master",
                        Cite("pytorch-2-13", "torch.autocast") + " with fp32 parameters", autocast=True),
        # Hugging Face Trainer's bf16=True on a model loaded in bf16 (from_pretrained(dtype=torch.bfloat16)): the
        # weights, their gradients and torch.optim's states (zeros_like the parameter) are bf16, no master copy, and
        # the forward runs under torch.autocast, which leaves 16-bit tensors as they are and casts the fp32 LoRA
        # adapters (transformers trainer.py autocast_smart_context_manager; accelerate's mixed_precision "bf16").
        PrecisionPolicy("bf16-autocast", "bf16", None, "bf16", "bf16", "bf16",
                        "bf16 weights, gradients and optimizer states, the forward under bf16 autocast (Trainer's "
                        "bf16=True on a bf16 model)",
                        Cite("pytorch-2-13", "torch.autocast") + " with bf16 parameters", autocast=True),
        PrecisionPolicy("fp32", "fp32", None, "fp32", "fp32", "fp32",
                        "everything in fp32", Cite("micikevicius2017") + ", baseline"),
        PrecisionPolicy("bf16", "bf16", None, "bf16", "bf16", "bf16",
                        "pure bf16: weights, gradients and optimizer states, no master copy",
                        Cite("anthony2023")),
    )
}

# The precisions only Megatron-LM runs: those that keep its DDP's grad buffer (megatron-bf16, megatron-fp16 and the
# Transformer Engine recipes). A run with one is Megatron-LM's (builder.model.gradbuffers' MEGATRON), whatever its
# implementation's op list.
MEGATRON_PRECISIONS = tuple(name for name, policy in PRECISIONS.items() if policy.grad_buffer)


@dataclass(frozen=True)
class Config:
    """Everything that decides per-GPU memory. Defaults describe a plain single-GPU run."""

    # What is being run -------------------------------------------------------------
    model: Architecture | None = None  # None: only a raw parameter count is known
    params: int | None = None  # raw parameter count (used when model is None)
    mode: str = "train"  # 'train' or 'serve'

    # Precision policy (a named policy; any field can be overridden below) ---------
    precision: str = "bf16-mixed"  # training: a named policy (PRECISIONS); serving: the weights' dtype
    param_dtype: str | None = None  # overrides the policy's weight dtype (serving: else the checkpoint's quantisation)
    master_dtype: str | None = None  # overrides the master copy dtype ('none' removes it)
    grad_dtype: str | None = None  # overrides the gradient dtype
    grad_accum_dtype: str | None = None  # separate accumulation buffer across micro-batches (e.g. fp32)
    reduce_dtype: str | None = None  # gradients reduced in it: FSDP's, DeepSpeed ZeRO-3's (refused elsewhere)
    optimizer_state_dtype: str | None = None  # overrides m/v/momentum dtype
    exp_avg_dtype: str | None = None  # Adam's first moment alone (torch's exp_avg; MS-AMP LBAdamW's exp_avg_dtype)
    exp_avg_sq_dtype: str | None = None  # Adam's second moment alone (exp_avg_sq; MS-AMP's exp_avg_sq_dtype)
    activation_dtype: str | None = None  # overrides the dtype of saved activations

    # Optimizer ---------------------------------------------------------------------
    optimizer: str = "adamw"  # which optimizer's states are kept (OPTIMIZERS)
    optimizer_impl: str | None = None  # 'for-loop', 'foreach', 'fused', 'in-backward' (None: the framework's own)

    # Workload ----------------------------------------------------------------------
    micro_batch: int = 1  # b: sequences per GPU per forward pass
    seq_len: int = 2048  # s: tokens per sequence
    grad_accum: int = 1  # micro-batches accumulated before a step (memory-neutral unless a buffer is kept)
    recompute: str = "none"  # 'none', 'selective' (attention core), 'full' (only layer inputs kept) or 'selective-op'
    recompute_layers: int = 0  # with 'full': 0 = every layer; K = the first K layers of each pipeline stage
    attention: str = "sdpa"  # 'eager' saves s x s scores; 'sdpa'/'flash' save none
    # TRL's DataCollatorForLanguageModeling with padding_free=False, HF's DataCollatorWithPadding; transformers'
    # masking_utils.sdpa_mask and sdpa_attention.py use_gqa_in_sdpa (builder.model.oplists._PADDING_MASK).
    padded: bool = False  # padded micro-batch (attention mask with zeros): SDPA keeps a mask a layer, K and V per head
    loss: str = "eager"  # 'eager', 'compiled', 'chunked', 'chunked-compiled' or 'fused-linear' (LOSSES)
    activation_formula: str = "ops"  # 'ops' (op by op) or 'korthikanti' (Table 2 reference formula)
    implementation: str = "hf"  # whose op list 'ops' follows: 'hf' (transformers), 'megatron', 'torchtune'
    dropout: bool = False  # dropout layers active (each saves a 1-byte mask)
    offload_activations: bool = False  # saved activations go to host memory (torchtune's OffloadActivations)
    checkpoint_save: str = "none"  # how a checkpoint is saved after the step, in the framework's words (none: no save)
    compile: bool = False  # every layer under torch.compile (inductor): what its partitioner saves (oplists)
    # torchao's float8 training as torchtitan (--model.converters float8) and torchtune (enable_fp8_training) run it
    # (builder.model.float8): Float8LinearConfig.from_recipe_name's recipe (None: off), FSDP2's float8 all-gather of
    # the converted weights, and the output layer left in bf16 (torchtitan's filter_fqns "output").
    float8: str | None = None  # torchao's float8 training recipe: tensorwise, rowwise or rowwise_with_gw_hp (null: off)
    enable_fsdp_float8_all_gather: bool = False  # torchao's Float8LinearConfig field: FSDP gathers weights in float8
    float8_filter_output: bool = False  # the output layer stays bf16 (torchtitan's filter_fqns output; torchtune's way)

    # Parallelism -------------------------------------------------------------------
    dp: int = 1  # data-parallel ranks
    zero: int = 0  # ZeRO stage 0-3 (DeepSpeed; in a Megatron-LM run 1 only: its distributed optimizer)
    fsdp: str | None = None  # FSDP sharding strategy (overrides zero when set)
    fsdp_shard_group: int | None = None  # HYBRID_SHARD: ranks per shard group (default: gpus_per_node)
    gradient_as_bucket_view: bool = False  # PyTorch DDP's: each .grad a view of DDP's buckets, not a second copy
    # torchtune's custom_sharded_layers (CUSTOM_SHARDED_LAYERS); none: the embeddings, final norm and output layer are
    # the root unit
    custom_sharded_layers: tuple[str, ...] = ()  # FSDP units of their own: tok_embeddings, output (none: in the root)
    tp: int = 1  # tensor-parallel ranks
    sequence_parallel: bool = False  # shard norms/dropouts along the sequence across TP ranks
    pp: int = 1  # pipeline stages
    pp_schedule: str = "1f1b"  # '1f1b' or 'interleaved'
    pp_virtual_stages: int = 1  # interleaved: model chunks per stage (v)
    cp: int = 1  # context-parallel ranks (sequence split across GPUs)
    ep: int = 1  # expert-parallel ranks (MoE experts split across GPUs)
    offload: str = "none"  # CPU offload: 'none', 'optimizer', 'params' or 'both'
    gpus_per_node: int = 8  # for host memory per node and HYBRID_SHARD defaults
    # DeepSpeed ZeRO-3's parameter coordinator, zero_optimization's keys in elements (builder.model.zero3; None:
    # DeepSpeed's default). Only with zero 3 (not FSDP).
    stage3_max_live_parameters: int | None = None  # 1e9: prefetching stops with this many gathered
    stage3_prefetch_bucket_size: int | None = None  # 5e7: elements fetched ahead of use
    stage3_param_persistence_threshold: int | None = None  # 1e5: tensors this small are never partitioned
    stage3_max_reuse_distance: int | None = None  # 1e9: a module used again within this many elements stays gathered
    # DeepSpeed ZeRO's gradient reduction, zero_optimization's keys (builder.model.buckets; None: DeepSpeed's default).
    # With zero 1 to 3 (not FSDP).
    reduce_bucket_size: int | None = None  # 5e8: gradient elements reduced at a time (its buffers' size)
    overlap_comm: bool | None = None  # DeepSpeed's default: true with stage 3, false otherwise (a second buffer in 1/2)
    contiguous_gradients: bool = True  # gradients copied into the reduce buffer as they are made
    # For the parts that need a shape (DeepSpeed ZeRO-3's largest layer); set by whoever reads a bare count.
    shaped_like: Architecture | None = None  # params alone: assumed shape (default the nearest catalog model)

    # Fine-tuning -------------------------------------------------------------------
    lora_rank: int = 0  # r: LoRA rank (0: full fine-tuning)
    lora_targets: tuple[str, ...] = ("q", "k", "v", "o")  # projections that get adapters
    lora_dropout: float = 0.0  # PEFT's or torchtune's lora_dropout: p > 0 saves each adapter's dropout mask and output
    qlora: bool = False  # base weights in 4-bit NF4 with their quantisation constants
    qlora_double_quant: bool = True  # QLoRA double quantisation of the constants
    kbit_prepare: str = "none"  # KBIT_PREPARE: which unquantised parameters a QLoRA run casts to fp32

    # Serving -----------------------------------------------------------------------
    batch: int = 1  # concurrent sequences
    context: int = 4096  # tokens per sequence held in the KV cache
    kv_dtype: str | None = None  # KV-cache dtype (default: weight dtype)
    # builder.model.serving ONLINE_FP8_SCALES: vLLM's --quantization fp8_per_block and fp8_per_channel.
    weight_scales: str | None = None  # fp8 weights' scales: block (per 128x128), channel (per row); None: per tensor

    # Overheads (named assumptions) -------------------------------------------------
    cuda_context_bytes: int = 0  # CUDA context + kernels, given; under SGLang: all memory gone before the weights
    allocator_reserve: float = 0.0  # fraction reserved by the caching allocator beyond allocated
    overhead_fraction: float = 0.0  # framework overhead as a fraction of the rest (seed 004: 0.10)
    overhead_bytes: int = 0  # a fixed extra amount

    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def with_changes(self, **changes: Any) -> "Config":
        """A copy with some options replaced."""
        return replace(self, **changes)

    @property
    def policy(self) -> PrecisionPolicy:
        """The effective precision policy after per-field overrides (builder.model.overrides' rule: an override wins
        over the policy; master_dtype 'none' removes the master copy)."""
        base = PRECISIONS[self.precision]
        chosen = {option: getattr(self, option) or "" for option in POLICY_OVERRIDES}
        # A served checkpoint published quantised keeps its own format unless param_dtype names another
        # (builder.model.serving.CHOSEN_WEIGHTS, the rule the calculator evaluates too).
        chosen["param_dtype"] = evaluate(CHOSEN_WEIGHTS, {
            "chosen_param_dtype": chosen["param_dtype"], "mode": self.mode,
            "checkpoint_quantization": self.model.checkpoint_quantization if self.model is not None else ""})
        return replace(base, **{state: evaluate(OVERRIDE_RULES[option], {CHOSEN: chosen[option],
                                                                         POLICY: getattr(base, state) or ""}) or None
                                for option, state in POLICY_OVERRIDES.items()})


OPTION_NAMES = tuple(f.name for f in fields(Config))

# The words of validate_config's checks that depend on the architecture and the numbers, as
# str.format templates: builder.widgets.calculator sends them to the calculator's script, which
# makes the same checks in the browser, so both say the same thing from one text.
def validate_config(config: Config) -> None:
    """Raise ValueError naming the first option out of range: each option's own type here, then its range
    (builder.model.ranges, one table) and the checks that need the model's inputs (builder.model.checks, which
    the calculator runs too)."""
    def fail(option: str, message: str) -> None:
        raise ValueError(f"{option}: {message}")

    if config.model is None and (config.params is None or config.params <= 0):
        fail("params", "give a model architecture or a positive parameter count")
    choices = {
        "mode": MODES, "precision": tuple(PRECISIONS), "optimizer": OPTIMIZERS,
        "recompute": RECOMPUTE, "attention": ATTENTION, "loss": LOSSES, "activation_formula": ACTIVATION_FORMULAS,
        "implementation": IMPLEMENTATIONS,
        "pp_schedule": PIPELINE_SCHEDULES, "offload": OFFLOAD, "checkpoint_save": CHECKPOINT_SAVES,
        "kbit_prepare": KBIT_PREPARE,
    }
    for option, allowed in choices.items():
        if getattr(config, option) not in allowed:
            fail(option, f"{getattr(config, option)!r} is not one of {', '.join(allowed)}")
    if config.optimizer_impl is not None and config.optimizer_impl not in OPTIMIZER_IMPLS:
        fail("optimizer_impl", f"{config.optimizer_impl!r} is not one of {', '.join(OPTIMIZER_IMPLS)}")
    if config.float8 is not None and config.float8 not in FLOAT8_RECIPES:
        fail("float8", f"{config.float8!r} is not one of {', '.join(FLOAT8_RECIPES)}")
    if config.fsdp is not None and config.fsdp not in FSDP_STRATEGIES:
        fail("fsdp", f"{config.fsdp!r} is not one of {', '.join(FSDP_STRATEGIES)}")
    for option in ("param_dtype", "grad_dtype", "grad_accum_dtype", "reduce_dtype",
                   "optimizer_state_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "activation_dtype", "kv_dtype"):
        value = getattr(config, option)
        if value is not None and value not in DTYPE_BYTES:
            fail(option, f"{value!r} is not a known dtype ({', '.join(DTYPE_BYTES)})")
    if config.weight_scales:
        if config.weight_scales not in WEIGHT_SCALES:
            fail("weight_scales", f"{config.weight_scales!r} is not one of {', '.join(WEIGHT_SCALES)}")
        if config.mode != "serve" or config.policy.param != "fp8" or (
                config.model is not None and config.model.checkpoint_quantization):
            fail("weight_scales", "the scales of fp8 weights quantised at load: serve (mode: serve) a 16-bit "
                                  "checkpoint with fp8 weights (param_dtype: fp8)")
    if config.master_dtype not in (None, "none") and config.master_dtype not in DTYPE_BYTES:
        fail("master_dtype", f"{config.master_dtype!r} is not a known dtype")
    if config.zero not in (0, 1, 2, 3):
        fail("zero", f"must be 0, 1, 2 or 3, got {config.zero}")
    for target in config.lora_targets:
        if target not in LORA_TARGETS:
            fail("lora_targets", f"{target!r} is not one of {', '.join(LORA_TARGETS)}")
    for layer in config.custom_sharded_layers:
        if layer not in CUSTOM_SHARDED_LAYERS:
            fail("custom_sharded_layers", f"{layer!r} is not one of {', '.join(CUSTOM_SHARDED_LAYERS)}")
    if config.fsdp_shard_group is not None and config.fsdp_shard_group < 1:
        fail("fsdp_shard_group", f"must be at least 1 (or unset: gpus_per_node), got {config.fsdp_shard_group}")
    for option in ("allocator_reserve", "overhead_fraction"):
        if not math.isfinite(getattr(config, option)):
            fail(option, f"must be a fraction between 0 and 10, got {getattr(config, option)}")
    if config.model is not None and config.shaped_like is not None:
        fail("shaped_like", "the shape assumed for a bare parameter count; give it with params, not with a model")
    if not math.isfinite(config.lora_dropout):
        fail("lora_dropout", f"must be a fraction between 0 and 1, got {config.lora_dropout}")
    if config.model is None and (config.ep > 1 or config.tp > 1 or config.pp > 1 or config.cp > 1):
        fail("model", "tensor, pipeline, context and expert parallelism need an architecture, not a raw count")
    if config.mode == "serve" and (config.zero or config.fsdp):
        fail("zero", "ZeRO/FSDP sharding applies to training; use tp/pp to split a served model")
    if config.fsdp and config.zero:  # FSDP's strategy would win (_shard_stage) and the stage mean nothing
        fail("fsdp", f"FSDP {config.fsdp} and ZeRO stage {config.zero} are two ways to shard; give fsdp or zero, "
                     "not both")
    # Imported here: builder.model.inputs reads a Config, so it imports this module.
    from builder.model.inputs import architecture_inputs, config_inputs

    refusal = first_refusal({**architecture_inputs(config.model), **config_inputs(config)})
    if refusal:
        raise ValueError(refusal)


FSDP_STAGE = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0, "HYBRID_SHARD": 3}


def _shard_stage(config: Config) -> int:
    """The ZeRO stage a config's sharding amounts to (FSDP strategies mapped onto stages)."""
    return FSDP_STAGE[config.fsdp] if config.fsdp else config.zero
