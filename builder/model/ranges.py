"""The range of every numeric option of builder.model.Config, in one table.

This is the one place an option's bounds are written. builder.model.checks turns each row into the rules that
refuse a value outside it (one line naming the option and the limit), validate_config runs them, and so does the
calculator's script (the rules travel to the browser as data), so the CLI, front matter, presets and URL state all
refuse the same values with the same words. Bounds that depend on the architecture (lora_rank up to the hidden
size, pp up to the layers, tp dividing the heads) are checks of their own in builder.model.checks; `zero` (0 to 3)
is a choice, checked with the other choices by validate_config.

Upper bounds are far beyond any real run and exist so that a typo or a hostile value (1e9 sequences, 1e400
tokens) is refused in one line instead of computing nonsense: 2**20 (about a million) for counts of ranks,
sequences and micro-batches, 2**24 (about 16.8 million) tokens for a sequence or a context, 10**15 parameters,
2**50 bytes (1 PiB) for a fixed size and 10 for the framework overhead's fraction. The caching allocator's reserve
stops at 1 (its row says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from builder.model.units import COUNT_LIMIT, SIZE_LIMIT

MILLION_ISH = 2**20  # ranks, sequences, micro-batches, layers
TOKENS = 2**24  # tokens in one sequence or one context
PARAMS = COUNT_LIMIT  # a quadrillion parameters
BYTES = SIZE_LIMIT  # 1 PiB


@dataclass(frozen=True)
class Range:
    """An option's accepted values: whole numbers (or, with `whole` False, any real number) from low to high."""

    option: str
    low: int
    high: int | Fraction
    what: str  # what the option counts, for the authoring guide and --help
    whole: bool = True  # False: a fraction (any real number in range)
    unset: int | None = None  # the value the rules read when the option is not given (exempt from `low`)

    def text(self, value: int | Fraction) -> str:
        """A bound as the messages print it: 1,048,576."""
        return f"{value:,}" if self.whole else str(value)


RANGES: tuple[Range, ...] = (
    # Whole numbers of at least 1 (checks.POSITIVE keeps this order: the calculator's whole-number controls).
    Range("micro_batch", 1, MILLION_ISH, "sequences per GPU per forward pass"),
    Range("seq_len", 1, TOKENS, "tokens per sequence"),
    Range("grad_accum", 1, MILLION_ISH, "micro-batches per optimizer step"),
    Range("dp", 1, MILLION_ISH, "data-parallel ranks"),
    Range("tp", 1, MILLION_ISH, "tensor-parallel ranks"),
    Range("pp", 1, MILLION_ISH, "pipeline stages"),
    Range("cp", 1, MILLION_ISH, "context-parallel ranks"),
    Range("ep", 1, MILLION_ISH, "expert-parallel ranks"),
    Range("pp_virtual_stages", 1, MILLION_ISH, "model chunks per pipeline stage"),
    Range("gpus_per_node", 1, 2**10, "GPUs in one node"),
    Range("batch", 1, MILLION_ISH, "concurrent sequences served"),
    Range("context", 1, TOKENS, "tokens per served sequence"),
    # The rest.
    Range("params", 1, PARAMS, "parameters (a raw count, or the architecture's)", unset=0),
    Range("fsdp_shard_group", 1, MILLION_ISH, "ranks per HYBRID_SHARD group (unset: gpus_per_node)", unset=0),
    # DeepSpeed ZeRO-3's options (builder.model.zero3: DeepSpeed's defaults when unset), in parameter elements.
    Range("stage3_max_live_parameters", 0, PARAMS, "DeepSpeed ZeRO-3: parameters resident per GPU before releasing "
          "(unset: 1e9)", unset=-1),
    Range("stage3_prefetch_bucket_size", 0, PARAMS, "DeepSpeed ZeRO-3: parameter elements fetched ahead of use "
          "(unset: 5e7)", unset=-1),
    Range("stage3_param_persistence_threshold", 0, PARAMS, "DeepSpeed ZeRO-3: parameters this small are not "
          "partitioned (unset: 1e5)", unset=-1),
    Range("stage3_max_reuse_distance", 0, PARAMS, "DeepSpeed ZeRO-3: a parameter reused within this many elements is "
          "not released (unset: 1e9)", unset=-1),
    # DeepSpeed ZeRO's reduce bucket (builder.model.buckets: DeepSpeed's default when unset), in gradient elements.
    Range("reduce_bucket_size", 0, PARAMS, "DeepSpeed ZeRO: gradient elements reduced at a time (unset: 5e8)",
          unset=-1),
    Range("recompute_layers", 0, MILLION_ISH, "fully recomputed layers per stage (0: every layer)"),
    Range("lora_rank", 0, MILLION_ISH, "LoRA rank (0: full fine-tuning; at most the hidden size)"),
    Range("lora_dropout", 0, 1, "LoRA dropout probability (PEFT's lora_dropout; 0: none)", whole=False),
    Range("cuda_context_bytes", 0, BYTES, "bytes of CUDA context"),
    Range("overhead_bytes", 0, BYTES, "bytes of fixed overhead"),
    # PyTorch's caching allocator (builder.model.allocator) gives a tensor of 10 MiB or more a segment of its size
    # rounded up to 2 MiB, under 20% more; smaller ones share 2 MiB and 20 MiB segments, and a freed block is cached
    # for the next request that fits. A reserve of 1 (100%) is as much again as is allocated, more than that rounding
    # and caching make of a step's tensors; a larger value is a typo (5 for 5%), refused.
    Range("allocator_reserve", 0, 1, "caching-allocator reserve, a fraction of what is allocated (at most 1: as much "
          "again)", whole=False),
    Range("overhead_fraction", 0, 10, "framework overhead, a fraction of the rest", whole=False),
)

RANGE_OF: dict[str, Range] = {r.option: r for r in RANGES}

