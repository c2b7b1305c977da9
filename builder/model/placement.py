"""Where parameters live, as rules: the pipeline stages worth evaluating, and how many parameters of each
kind one GPU of a stage holds under TP, PP and EP.

Megatron-LM layout (Shoeybi et al. 2019, arXiv:1909.08053, section 3; Narayanan et al.
2021, arXiv:2104.04473): attention and MLP matrices split over t tensor-parallel ranks,
norms and the MoE router replicated, the vocabulary split over t (vocab-parallel
embedding and output layer); pipeline stage 1 holds the embeddings, the last stage the
final norm and output layer (and a copy of tied embeddings); experts split over e
expert-parallel ranks. Data-parallel sharding (ZeRO/FSDP) is applied afterwards
(builder.model.states). The rules read the parameter-tensor table of builder.model.tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from typing import Any, Mapping

from builder.model.expr import (both, ceil, either, eq, evaluate, exact, isin, maximum, minimum, mod, ne, negate, row,
                                sym, table, total, when)
from builder.model.partrules import RuleSet
from builder.model.serving import ONLINE_FP8_BLOCK
from builder.model.tensors import NORM_TENSORS

p, v = sym("pp"), sym("pp_virtual_stages")
m = sym("grad_accum")


def in_flight(rank: object) -> object:
    """Micro-batches whose activations pipeline rank `rank` holds at its peak, in units of the whole stage.

    Narayanan et al. 2021 (arXiv:2104.04473), section 2.2, as Megatron-LM's get_pp_rank_microbatches
    (megatron/core/pipeline_parallel/schedules.py, commit d98e8a6) runs it: 1F1B warms up with p - rank - 1
    forwards, interleaved 1F1B with (p - rank - 1) x 2 + (v - 1) x p model-chunk forwards (its default
    microbatch_group_size_per_vp_stage is p), both capped at the m x v chunks there are; the steady state's next
    forward makes one more before a backward frees any. A chunk holds 1/v of the stage's layers, so the interleaved
    count is divided by v: rank 0 holds (p v + p - 1)/v = p (1 + (p-1)/(p v)) stages' worth, Korthikanti's factor."""
    interleaved = both(eq(sym("pp_schedule"), "interleaved"), v > 1)
    return when(interleaved, minimum((p - rank - 1) * 2 + (v - 1) * p + 1, m * v) / v, minimum(p - rank, m))


# The stages worth evaluating: the only one, or the first (most micro-batches in flight) and the last (the head).
# Layers spread as evenly as possible: the first stage gets ceil(L/p), the last floor(L/p). Each holds the
# micro-batches its own rank has in flight (in_flight): stages in between hold fewer than the first, the same
# layers or fewer, and neither the embedding nor the head, so their peak is never the highest.
PIPELINED = both(sym("has_architecture"), p > 1)
STAGES = table(
    row(negate(PIPELINED), name="only", layers=sym("layers"), has_embedding=1, has_head=1, in_flight=1),
    row(PIPELINED, name="first", layers=ceil(sym("layers") / p), has_embedding=1, has_head=0, in_flight=in_flight(0)),
    row(PIPELINED, name="last", layers=sym("layers") // p, has_embedding=0, has_head=1, in_flight=in_flight(p - 1)),
)

# How many tensor-parallel ranks share a tensor of a group: norms, the router and latent attention's down
# projections (vLLM deepseek_v2.py: ReplicatedLinear) are replicated; with fewer
# KV heads than ranks each rank keeps one KV head (replicated, as Megatron-LM and vLLM do), in a fused q/k/v tensor
# too (Phi-3's qkv_proj: a/t query heads and 2 x max(1, k/t) KV heads a rank, vLLM QKVParallelLinear); experts
# split over tp x ep; everything else over tp.
_FUSED_QKV_SHARE = ((sym("heads") + 2 * sym("kv_heads"))
                    / (sym("heads") / sym("tp") + 2 * maximum(1, sym("kv_heads") // sym("tp"))))
TP_SHARE = when(isin(sym("group"), "norms", "mlp/router", "attention/latent"), 1,
                when(both(eq(sym("group"), "attention/kv"), sym("kv_heads") < sym("tp")), sym("kv_heads"),
                     when(both(eq(sym("group"), "attention/qkv"), sym("kv_heads") < sym("tp")), _FUSED_QKV_SHARE,
                          when(eq(sym("group"), "mlp/experts"), sym("tp") * sym("ep"), sym("tp")))))


# A block's weight matrix of a GEMM: not a norm, a bias or the MoE router.
GEMM = both(negate(isin(sym("group"), "norms", "mlp/router")), sym("rest") > 1)


# A block's weight that torchtitan converts to float8: a projection's matrix both of whose sizes 16 divides.
FLOAT8_CONVERTED = both(isin(sym("group"), "attention/q", "attention/kv", "attention/out", "mlp"), sym("rest") > 1,
                        eq(mod(sym("dim0"), 16), 0), eq(mod(sym("rest"), 16), 0))


def _in_one_block(condition: Any) -> Any:
    """One block's parameters on this GPU among the tensor rows where `condition` holds."""
    return total(sym("parameter_tensors"), when(both(sym("in_block"), condition),
                                                sym("dim0") * sym("rest") * sym("count") / TP_SHARE, 0))


# The modules FSDP may wrap as units of their own, before the blocks and the root, in torchtune's words
# (custom_sharded_layers: recipes/full_finetune_distributed.py _setup_model and torchtune/training/_distributed.py
# shard_model at 30b8519, which calls fully_shard on every module whose name is listed;
# recipes/configs/llama3_1/70B_full.yaml lists both). torchtitan wraps both in every untied decoder
# (torchtitan/distributed/fsdp.py apply_fsdp_to_decoder at b5bcd76: tok_embeddings, then norm with lm_head).
CUSTOM_SHARDED_LAYERS = ("tok_embeddings", "output")
# torchtune's custom_sharded_layers as the rules read them (builder.model.inputs.custom_layers_input): every
# selection of CUSTOM_SHARDED_LAYERS, in their order, joined by commas.
CUSTOM_LAYOUTS = tuple(",".join(chosen) for size in range(1, len(CUSTOM_SHARDED_LAYERS) + 1)
                       for chosen in combinations(CUSTOM_SHARDED_LAYERS, size))


def custom_layer(name: str) -> Any:
    """Whether the run wraps module `name` (one of CUSTOM_SHARDED_LAYERS) as an FSDP unit of its own."""
    return isin(sym("custom_sharded_layers"), *(layout for layout in CUSTOM_LAYOUTS if name in layout.split(",")))


# Who calls fully_shard, and so how the units are cut and when they are resharded (builder.model.states' COMM and
# builder.model.step's AT_PHASE read it). torchtune's shard_model (torchtune/training/_distributed.py at 30b8519)
# passes its reshard_after_forward (True) to every call: the output layer's, alone, and the root's. torchtitan's
# apply_fsdp_to_decoder (torchtitan/distributed/fsdp.py at b5bcd76, the default policy without pipeline parallelism)
# wraps the final norm with the output layer, fully_shard([model.norm, model.lm_head],
# reshard_after_forward=reshard_after_forward_policy == "always"): False by default ("As an optimization, do not
# reshard_after_forward the last layers by default since FSDP would prefetch them immediately"), and leaves the root
# to fully_shard's default; accelerate 1.15's fsdp2_prepare_model wraps its tail [final norm, lm_head] with
# reshard_after_forward=False and its root so too. The model takes implementation torchtune for the first and any
# other implementation for the second.
SHARD_MODEL = eq(sym("implementation"), "torchtune")
# The block of fp32 weight scales: vLLM's fp8_per_block's 128 x 128 where the weights are quantised at load in blocks
# (weight_scales "block"), else a checkpoint's own (checkpoint_block_rows x _cols; 0 x 0 for none).
ONLINE_BLOCKS = eq(sym("weight_scales"), "block")
SCALE_BLOCK_ROWS = when(ONLINE_BLOCKS, ONLINE_FP8_BLOCK, sym("checkpoint_block_rows"))
SCALE_BLOCK_COLS = when(ONLINE_BLOCKS, ONLINE_FP8_BLOCK, sym("checkpoint_block_cols"))


HOLDING = RuleSet(symbols={
    # One block's parameters on this GPU (an FSDP unit), its experts', its linear layers' (not norms or gpt-oss's
    # attention sinks: what 4-bit quantisation touches) and of those its weight matrices alone (biases left out).
    "layer_unit": _in_one_block(1),
    "layer_expert": _in_one_block(eq(sym("group"), "mlp/experts")),
    "layer_linear": _in_one_block(negate(isin(sym("group"), "norms", "attention/sinks"))),
    "layer_norms": _in_one_block(eq(sym("group"), "norms")),
    "layer_matrices": _in_one_block(both(ne(sym("group"), "norms"), sym("rest") > 1)),
    # The weight matrices of a block's GEMMs that a low-precision recipe quantises (builder.model.recipes): the
    # linear layers' weights, not the norms, the biases or the MoE router (a plain 16-bit layer in Megatron-LM),
    # and of those the routed experts'.
    "layer_gemms": _in_one_block(GEMM),
    "layer_expert_gemms": _in_one_block(both(eq(sym("group"), "mlp/experts"), sym("rest") > 1)),
    # The scales of those matrices in a checkpoint quantised in blocks (checkpoint_block_rows x _cols, one fp32 scale
    # a block), or quantised at load in blocks (weight_scales "block", vLLM's fp8_per_block: 128 x 128, the same
    # layout, builder.model.serving ONLINE_FP8_SCALES): ceil(rows / block rows) x ceil(columns / block columns) a
    # matrix, split over tensor parallelism as the matrix is (vLLM refuses a split that leaves a rank part of a
    # block: validate_fp8_block_shape).
    "layer_gemm_blocks": when(SCALE_BLOCK_ROWS > 0, total(sym("parameter_tensors"), when(
        both(sym("in_block"), GEMM),
        ceil(sym("dim0") / maximum(SCALE_BLOCK_ROWS, 1))
        * ceil(sym("rest") / maximum(SCALE_BLOCK_COLS, 1)) * sym("count") / TP_SHARE, 0)), 0),
    # The weights of a block torchtitan converts to torchao's Float8Linear (builder.model.float8): the projections'
    # matrices whose two sizes 16 divides (torchtitan/components/quantization/utils.py module_filter_fn), and how many.
    "layer_float8": _in_one_block(FLOAT8_CONVERTED),
    "layer_float8_tensors": total(sym("parameter_tensors"), when(both(sym("in_block"), FLOAT8_CONVERTED),
                                                                 sym("count"), 0)),
    "vocab_rows": ceil(sym("vocab") / sym("tp")) * sym("hidden"),
    # The embeddings on the first stage; the final norm and the output layer on the last (an untied head, or
    # the tied copy Megatron-LM keeps on the last stage): the FSDP root unit.
    "root_unit": when(sym("stage_has_embedding"),
                      sym("vocab_rows") + sym("position_embeddings") * sym("hidden"), 0)
    + when(sym("stage_has_head"), sym("hidden") * NORM_TENSORS
           + when(either(negate(sym("tied_embeddings")), negate(sym("stage_has_embedding"))), sym("vocab_rows"), 0), 0),
    # The modules FSDP wraps as units of their own before the blocks and the root (torchtune's custom_sharded_layers:
    # torchtune/training/_distributed.py shard_model at 30b8519 calls fully_shard on each module whose name is
    # listed, then on every block, then on the model; torchtitan/distributed/fsdp.py apply_fsdp_to_decoder at
    # b5bcd76 wraps tok_embeddings, and norm with lm_head): the token embedding on the stage that has it, the output
    # layer on the stage with the head (untied: builder.model.checks refuses tied embeddings), with the final norm
    # outside torchtune (SHARD_MODEL). The root unit FSDP keeps is what no unit of its own took: the final norm with
    # torchtune, and learned position embeddings.
    "embedding_unit": when(both(custom_layer("tok_embeddings"), sym("stage_has_embedding")), sym("vocab_rows"), 0),
    "output_unit": when(both(custom_layer("output"), sym("stage_has_head")),
                        sym("vocab_rows") + when(SHARD_MODEL, 0, sym("hidden") * NORM_TENSORS), 0),
    "fsdp_root": sym("root_unit") - sym("embedding_unit") - sym("output_unit"),
    # Without an architecture (a raw parameter count) every parameter is dense and linear.
    "dense": when(sym("has_architecture"),
                  (sym("layer_unit") - sym("layer_expert")) * sym("stage_layers") + sym("root_unit"), sym("params")),
    "expert": sym("layer_expert") * sym("stage_layers"),
    "linear": when(sym("has_architecture"), sym("layer_linear") * sym("stage_layers"), sym("params")),
    "linear_matrices": sym("layer_matrices") * sym("stage_layers"),
    "gemms": when(sym("has_architecture"), sym("layer_gemms") * sym("stage_layers"), sym("params")),
    "expert_gemms": sym("layer_expert_gemms") * sym("stage_layers"),
    # Offloading the optimizer (ZeRO-Offload, FSDP CPU offload) moves its states and the gradients to host memory;
    # each GPU of a node keeps its own copy there (Ren et al. 2021, arXiv:2101.06840, section 4).
    # Offloaded activations (torchtune's OffloadActivations): every layer's saved tensors, one part, go there too.
    # A row's `bucket` names a bucket, or one part by its full name.
    "offloaded": table(*(row(isin(sym("offload"), "optimizer", "both"), bucket=bucket)
                         for bucket in ("optimizer", "gradients")),
                       row(sym("offload_activations"), bucket="activations/offloaded")),
    "host_copies": minimum(sym("gpus_per_node"), sym("dp") * sym("tp") * sym("pp") * sym("cp")),
}, parts=())


@dataclass(frozen=True)
class Stage:
    """One pipeline stage as the GPU that runs it sees it."""

    name: str  # 'only', 'first' or 'last'
    layers: int  # transformer blocks on this stage
    has_embedding: bool
    has_head: bool  # final norm + output layer (logits, loss)
    in_flight: Fraction  # micro-batches whose activations are held at the peak

    def inputs(self) -> dict[str, Any]:
        """The stage as the rules read it (micro-batches in flight a whole number as an int: expr.exact)."""
        return {"stage_layers": self.layers, "stage_has_embedding": int(self.has_embedding),
                "stage_has_head": int(self.has_head), "stage_in_flight": exact(self.in_flight)}


def stages_of(inputs: Mapping[str, Any]) -> list[Stage]:
    """The stages the STAGES table gives for a run's inputs (architecture_inputs and config_inputs)."""
    return [Stage(r["name"], int(r["layers"]), bool(r["has_embedding"]), bool(r["has_head"]), Fraction(r["in_flight"]))
            for r in evaluate(STAGES, inputs)]
