"""Transformer architectures and exact parameter counts.

An Architecture is data (the catalog in content/models.toml fills it); this module only
counts. Counting follows the module layout of the reference implementations:
Hugging Face transformers `modeling_gpt2.py` (Conv1D with biases, learned positions,
LayerNorm) and `modeling_llama.py` / `modeling_mistral.py` / `modeling_mixtral.py` /
`modeling_qwen2.py` (no biases except Qwen2's q/k/v, RMSNorm, rotary positions), transformers 5.23
`models/gpt_oss/modeling_gpt_oss.py` (gpt-oss: q/k/v/o biases, a learned attention sink per head, a biased
router and biased experts), and `modeling_phi3.py` (the Llama block with q/k/v and gate/up each fused into one
Linear). Totals are checked in tests against each model's published count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from builder.model.checks import SHAPE_CHECKS, first_refusal
from builder.model.serving import CHECKPOINT_QUANTIZATIONS
from builder.model.tensors import SHAPES

MLP_TYPES = ("gelu", "swiglu")
MOE_BLOCKS = ("", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss")
NORM_TYPES = ("layernorm", "rmsnorm")
POSITION_TYPES = ("learned", "rotary")


@dataclass(frozen=True)
class Architecture:
    """Shape of a decoder-only transformer. Symbols used in formulas are given per field."""

    name: str
    layers: int  # L: transformer blocks
    hidden: int  # h: model width
    heads: int  # a: query heads
    vocab: int  # V: vocabulary size (rows of the embedding)
    ffn: int  # MLP inner width (4h for GPT-2, 11008 for Llama-2-7B); 0 for pure-MoE layers
    kv_heads: int | None = None  # key/value heads; < heads means GQA, 1 means MQA (default: heads)
    head_dim: int | None = None  # d: per-head width (default: hidden // heads)
    mlp: str = "swiglu"  # 'gelu' (2 matrices) or 'swiglu' (gate, up, down: 3 matrices)
    norm: str = "rmsnorm"  # 'layernorm' (weight + bias) or 'rmsnorm' (weight only)
    qkv_bias: bool = False  # biases on the q/k/v projections (GPT-2, Qwen2)
    out_bias: bool = False  # bias on the attention output projection (GPT-2)
    mlp_bias: bool = False  # biases on MLP matrices (GPT-2; gpt-oss's experts: gate_up_proj_bias, down_proj_bias)
    qk_norm: bool = False  # an RMSNorm over each query and key head (Qwen3: q_norm, k_norm of head_dim)
    tied_embeddings: bool = False  # lm_head shares the token embedding matrix
    positions: str = "rotary"  # 'learned' adds a max_positions x h table; 'rotary' has no parameters
    max_positions: int = 0  # rows of the learned position table
    # Serving engines' rotary cos/sin table (builder.model.rotary); parameter counts and training do not read it.
    max_position_embeddings: int = 0  # rotary: the positions vLLM and SGLang precompute cos/sin for (config.json's; YaRN: original x factor); 0: none
    config_positions: int = 0  # rotary: SGLang's own length where it is not those rows (config.json's max_position_embeddings beside a rope_scaling original_max_position_embeddings); 0: the rows
    experts: int = 0  # routed experts per MoE layer (0 = dense MLP)
    top_k: int = 0  # experts each token is routed to
    shared_experts: int = 0  # experts every token passes through (DeepSeek-style)
    expert_ffn: int = 0  # inner width of one expert (default: ffn)
    sliding_window: int | None = None  # attention window in tokens (Mistral-7B v0.1: 4096)
    # transformers' Gemma 3 sliding_window_pattern; Gemma 2 and gpt-oss alternate.
    sliding_window_pattern: int = 0  # with sliding_window: every Nth layer is full attention (Gemma 2: 2, Gemma 3: 6); 0: all slide
    # Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434, section 2.1; transformers modeling_deepseek_v2.py):
    # the cache keeps a compressed latent of kv_lora_rank and one rotary key of qk_rope_head_dim per token and layer.
    kv_lora_rank: int = 0  # d_c: 512 in DeepSeek-V2/V3; 0 = no latent attention
    qk_rope_head_dim: int = 0  # d_h^R: the decoupled rotary key, shared by all heads (64)
    q_lora_rank: int = 0  # d_c': the query's low-rank width (DeepSeek-V3: 1536); 0 = one q_proj
    v_head_dim: int = 0  # per-head value width under MLA (128); head_dim is the query/key width (nope + rope)
    first_dense_layers: int = 0  # MoE: the first layers keep a dense MLP of width ffn (DeepSeek first_k_dense_replace)
    router_bias: bool = False  # MoE: a per-expert bias on the router (DeepSeek-V3's e_score_correction_bias, gpt-oss's)
    moe_block: str = ""  # MoE block of transformers' code: mixtral (''), qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, gpt_oss
    norm_topk: bool = True  # MoE: the top-k routing weights renormalised to sum to 1 (norm_topk_prob; Mixtral always)
    group_limited: bool = False  # MoE: DeepSeek-V2's group-limited routing (topk_method 'group_limited_greedy')
    sandwich_norms: bool = False  # RMSNorms after attention and after the MLP too: 4 per block (Gemma 2 and 3)
    attention_sinks: bool = False  # a learned sink logit per query head in every layer (gpt-oss's self_attn.sinks)
    fused_projections: bool = False  # q, k, v in one qkv_proj and gate, up in one gate_up_proj (Phi-3, transformers)
    activation: str = "gelu_tanh_python"  # how the GeLU is computed, for activation accounting
    # The quantisation the published checkpoint carries (config.json's quantization_config): a served run loads the
    # weights in it unless it names their dtype itself, as vLLM and SGLang do (builder.model.serving
    # CHECKPOINT_QUANTIZATIONS, CHOSEN_WEIGHTS); training runs load 16-bit weights.
    checkpoint_quantization: str = ""  # quant_method of the published weights ('fp8', 'mxfp4'); '' for 16-bit
    checkpoint_block: tuple[int, int] = (0, 0)  # weight_block_size (rows, cols): a scale a block; (0, 0): a tensor
    family: str = ""  # 'gpt2', 'llama', 'mistral', 'mixtral', 'qwen2', 'gpt_oss', ...: the model family
    source: str = ""  # where the numbers come from (config.json URL or paper)
    published_params: int | None = None  # the public total, checked in tests
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        # The shape's checks are rules (builder.model.checks.SHAPE_CHECKS), which the calculator's script runs too.
        refused = first_refusal({"model_name": self.name, "layers": self.layers, "hidden": self.hidden,
                                 "heads": self.heads, "vocab": self.vocab, "kv_heads": self.kv_heads or self.heads,
                                 "experts": self.experts, "top_k": self.top_k}, SHAPE_CHECKS)
        if refused:
            raise ValueError(refused)
        if self.mlp not in MLP_TYPES:
            raise ValueError(f"{self.name}: mlp must be one of {MLP_TYPES}, got {self.mlp!r}")
        if self.moe_block not in MOE_BLOCKS:
            raise ValueError(f"{self.name}: moe_block must be one of {MOE_BLOCKS[1:]}, got {self.moe_block!r}")
        if self.group_limited and self.moe_block != "deepseek_v2":
            raise ValueError(f"{self.name}: group_limited is DeepSeek-V2's routing (moe_block 'deepseek_v2')")
        if self.norm not in NORM_TYPES:
            raise ValueError(f"{self.name}: norm must be one of {NORM_TYPES}, got {self.norm!r}")
        if self.positions not in POSITION_TYPES:
            raise ValueError(f"{self.name}: positions must be one of {POSITION_TYPES}, got {self.positions!r}")
        if self.positions == "learned" and self.max_positions <= 0:
            raise ValueError(f"{self.name}: learned positions need max_positions > 0")
        if self.max_position_embeddings < 0 or (self.max_position_embeddings and self.positions != "rotary"):
            raise ValueError(f"{self.name}: max_position_embeddings is a rotary model's (>= 0); learned positions "
                             "use max_positions")
        if self.config_positions < 0 or (self.config_positions and not self.max_position_embeddings):
            raise ValueError(f"{self.name}: config_positions (>= 0) is a rotary model's, beside its "
                             "max_position_embeddings")
        if self.sliding_window_pattern and not self.sliding_window:
            raise ValueError(f"{self.name}: sliding_window_pattern needs a sliding_window")
        if self.sliding_window_pattern < 0 or self.sliding_window_pattern > self.layers:
            raise ValueError(f"{self.name}: sliding_window_pattern must be between 0 and the layers ({self.layers})")
        if self.kv_lora_rank and not self.qk_rope_head_dim:
            raise ValueError(f"{self.name}: latent attention (kv_lora_rank) needs qk_rope_head_dim")
        if self.first_dense_layers and not (self.experts and self.ffn and self.first_dense_layers < self.layers):
            raise ValueError(f"{self.name}: first_dense_layers needs experts, a dense ffn and fewer than all layers")
        self._check_checkpoint_quantization()

    def _check_checkpoint_quantization(self) -> None:
        """The checkpoint's quantisation is one the model follows, its block two sizes (a TOML list kept as a
        tuple), both 0 (one scale a tensor) or both positive, and only with a quantisation."""
        block = self.checkpoint_block
        if isinstance(block, list):
            block = tuple(block)
            object.__setattr__(self, "checkpoint_block", block)
        known = ", ".join(CHECKPOINT_QUANTIZATIONS)
        if self.checkpoint_quantization not in ("", *CHECKPOINT_QUANTIZATIONS):
            raise ValueError(f"{self.name}: checkpoint_quantization must be one of {known} (or left out for 16-bit "
                             f"weights), got {self.checkpoint_quantization!r}")
        if not (isinstance(block, tuple) and len(block) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1 << 24 for v in block)
                and (block[0] > 0) == (block[1] > 0)):
            raise ValueError(f"{self.name}: checkpoint_block must be two whole numbers, the rows and columns of a "
                             f"block that shares one scale (both 0: one scale a tensor), got {block!r}")
        if block[0] and not self.checkpoint_quantization:
            raise ValueError(f"{self.name}: checkpoint_block is the block of a checkpoint_quantization; give both")
        if self.checkpoint_quantization == "mxfp4" and not self.experts:
            raise ValueError(f"{self.name}: checkpoint_quantization 'mxfp4' quantises the routed experts (gpt-oss); it "
                             "needs experts")

    # Derived sizes -------------------------------------------------------------------
    @property
    def n_kv_heads(self) -> int:
        """Key/value heads (equals heads for classic multi-head attention)."""
        return self.kv_heads or self.heads

    @property
    def d_head(self) -> int:
        """Per-head width d."""
        return self.head_dim or self.hidden // self.heads

    @property
    def n_expert_ffn(self) -> int:
        """Inner width of one expert MLP."""
        return self.expert_ffn or self.ffn

    @property
    def is_moe(self) -> bool:
        """True when MLPs are mixtures of experts."""
        return self.experts > 0

    @property
    def learned_positions(self) -> int:
        """The rows of a learned position table, the longest sequence the model can take (GPT-2: 1,024); 0 for
        rotary positions, which have no table to index past."""
        return self.max_positions if self.positions == "learned" else 0

    @property
    def served_positions(self) -> int:
        """The positions vLLM allows (its default request length): the rotary table's rows, or the learned position
        table's; 0 where the model gives none."""
        return self.max_position_embeddings or self.max_positions

    def engine_positions(self, engine: str) -> int:
        """The positions `engine` allows: SGLang's differ from vLLM's where a rope_scaling that names
        original_max_position_embeddings scales the rows to other than max_position_embeddings (config_positions:
        YaRN, linear or dynamic scaling with an original); 0 where the model gives none."""
        return (engine == "sglang" and self.config_positions) or self.served_positions

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices per MLP: 2 for GeLU (up, down), 3 for SwiGLU (gate, up, down)."""
        return 3 if self.mlp == "swiglu" else 2

    def with_changes(self, **changes: Any) -> "Architecture":
        """A copy with some fields replaced (validated again)."""
        return replace(self, **changes)


def shape_inputs(arch: Architecture) -> dict[str, Any]:
    """The shape as rules read it (the custom-architecture controls' names, flags as 0 or 1)."""
    return {"has_architecture": 1, "model_name": arch.name, "model_family": arch.family,
            "layers": arch.layers, "hidden": arch.hidden,
            "heads": arch.heads, "kv_heads": arch.n_kv_heads, "head_dim": arch.d_head, "ffn": arch.ffn,
            "expert_ffn": arch.n_expert_ffn, "vocab": arch.vocab, "experts": arch.experts, "top_k": arch.top_k,
            "shared_experts": arch.shared_experts, "sliding_window": arch.sliding_window or 0, "mlp": arch.mlp,
            "norm": arch.norm, "tied_embeddings": int(arch.tied_embeddings),
            "position_embeddings": arch.learned_positions,
            "rope_positions": arch.max_position_embeddings, "rope_tables": rope_tables(arch),
            "context_positions": arch.config_positions or arch.max_position_embeddings,
            "fused_qkv": int(arch.family == "gpt2"), "qkv_bias": int(arch.qkv_bias), "out_bias": int(arch.out_bias),
            "mlp_bias": int(arch.mlp_bias), "qk_norm": int(arch.qk_norm), "activation_function": arch.activation,
            "sliding_window_pattern": arch.sliding_window_pattern, "kv_lora_rank": arch.kv_lora_rank,
            "qk_rope_head_dim": arch.qk_rope_head_dim, "q_lora_rank": arch.q_lora_rank,
            "v_head_dim": arch.v_head_dim or arch.d_head, "first_dense_layers": arch.first_dense_layers,
            "router_bias": int(arch.router_bias), "sandwich_norms": int(arch.sandwich_norms),
            "moe_block": arch.moe_block, "norm_topk": int(arch.norm_topk), "group_limited": int(arch.group_limited),
            "checkpoint_quantization": arch.checkpoint_quantization,
            "checkpoint_block_rows": arch.checkpoint_block[0], "checkpoint_block_cols": arch.checkpoint_block[1],
            "attention_sinks": int(arch.attention_sinks),
            "fused_projections": int(arch.fused_projections)}


def rope_tables(arch: Architecture) -> int:
    """Rotary cos/sin tables a serving engine builds: one per distinct rotary setting, since get_rope hands every
    layer with the same setting one shared module (vLLM rotary_embedding/__init__.py and SGLang rotary_embedding.py
    _ROPE_DICT). Gemma 3's sliding layers rotate with rope_local_base_freq and its full layers with rope_theta (vLLM
    models/gemma3.py): two tables. 0 without positions to build one for."""
    if not arch.max_position_embeddings:
        return 0
    return 2 if arch.family == "gemma3" and arch.sliding_window_pattern else 1


@lru_cache(maxsize=256)
def _shape(arch: Architecture) -> dict[str, Any]:
    return SHAPES.environment(shape_inputs(arch))


def shape_with_tensors(arch: Architecture) -> dict[str, Any]:
    """shape_inputs with the parameter-tensor table and the parameter count (builder.model.tensors) added."""
    return dict(_shape(arch))


def _by_group(arch: Architecture, in_block: bool) -> dict[str, int]:
    """Parameters by the tensor table's groups: one block's (in_block) or the rest's."""
    groups: dict[str, int] = {}
    for t in _shape(arch)["parameter_tensors"]:
        if t["in_block"] == in_block:
            groups[t["group"]] = groups.get(t["group"], 0) + t["dim0"] * t["rest"] * t["count"]
    return groups


def layer_param_groups(arch: Architecture) -> dict[str, int]:
    """Parameters of one transformer block, by group."""
    return _by_group(arch, True)


def param_groups(arch: Architecture) -> dict[str, int]:
    """All parameters by path-like group; values sum to the model's total."""
    outside = _by_group(arch, False)
    head = {name: outside.pop(name) for name in ("final_norm", "lm_head") if name in outside}
    return outside | {f"layers/{name}": count * arch.layers for name, count in layer_param_groups(arch).items()} | head


def param_count(arch: Architecture) -> int:
    """Total parameters, counting a tied embedding once."""
    return int(_shape(arch)["parameters"])


def active_param_count(arch: Architecture) -> int:
    """Parameters one token passes through: an MoE layer counts top_k of its experts."""
    return int(_shape(arch)["active_parameters"])  # builder.model.tensors.ACTIVE_PARAMETERS


def parameter_tensors(arch: Architecture) -> list[tuple[tuple[int, ...], int]]:
    """(shape, how many) of every parameter tensor, as transformers lays them out (builder.model.tensors):
    a shape is (dim0,) or (dim0, the product of the other dimensions). FSDP2 shards along dim0."""
    def shape(t: dict) -> tuple[int, ...]:
        return (t["dim0"],) if t["rest"] == 1 else (t["dim0"], t["rest"])

    return [(shape(t), t["count"] * (arch.layers if t["in_block"] else 1))
            for t in _shape(arch)["parameter_tensors"] if t["count"]]


# Hugging Face config.json -> Architecture -------------------------------------------------

_HF_FAMILIES = {
    "gpt2": "gpt2",
    "gpt_oss": "gpt_oss",
    "llama": "llama",
    "mistral": "mistral",
    "mixtral": "mixtral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen2_moe": "qwen2",
    "qwen3_moe": "qwen3",
    "deepseek_v2": "deepseek",
    "deepseek_v3": "deepseek",
    "gemma2": "gemma2",
    "gemma3_text": "gemma3",
    # Phi-3 and Phi-4 (Phi3ForCausalLM): a Llama block with q, k and v fused into qkv_proj and gate and up into
    # gate_up_proj (transformers 5.23 models/phi3/modeling_phi3.py Phi3Attention, Phi3MLP).
    "phi3": "phi3",
}


_QWEN = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")  # sliding_window is set but off unless use_sliding_window
_ROTARY = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3",
           "phi3")
_DEEPSEEK = ("deepseek_v2", "deepseek_v3")


def _truthy(value: Any, config: dict[str, Any]) -> bool:
    return bool(value)


class ConfigFieldError(ValueError):
    """A config.json field the reader refuses: `field` names it (a nested one as rope_scaling.factor), so that the
    file's reader can add its line (builder.catalog.load_hf_config)."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def _field_error(field: str, reason: str) -> ConfigFieldError:
    return ConfigFieldError(field, f"config.json field {field}: {reason}")


@dataclass(frozen=True)
class HfField:
    """What a config.json field read here accepts. kind: 'whole' (a JSON integer from low to high), 'number' (finite,
    from low to high; above low where `above`), 'flag' (true or false), 'text' (one of `choices`), 'object', 'names'
    (a list of text). null is the field not given (transformers' default), except for a field the model needs."""

    kind: str
    low: int | float = 0
    high: int | float = 0
    choices: tuple[str, ...] = ()
    above: bool = False


# Bounds far beyond any released model, so that a typo or a hostile value is refused by name rather than computed:
# layers, heads and experts up to 2**20, widths and vocabularies up to 2**24, positions up to 2**31 (int32's, which
# the engines index them in).
_COUNTS, _WIDTHS, _POSITIONS = 2**20, 2**24, 2**31
_count_field, _width_field = HfField("whole", 1, _COUNTS), HfField("whole", 1, _WIDTHS)
_probability = HfField("number", 0, 1)
_flag_field = HfField("flag")
# Every config.json field from_hf_config (and what it calls) reads, with what it accepts: checked before any is read
# (check_values), so each refusal is one line naming the field. UNMODELLED_FIELDS below are read to be refused.
HF_FIELDS: dict[str, HfField] = {
    # GPT-2 (transformers GPT2Config)
    "n_layer": _count_field, "n_head": _count_field, "n_embd": _width_field, "n_inner": _width_field,
    "n_positions": HfField("whole", 1, _POSITIONS),
    "activation_function": HfField("text", choices=("gelu", "gelu_new", "gelu_fast", "gelu_python",
                                                    "gelu_pytorch_tanh")),
    "resid_pdrop": _probability, "embd_pdrop": _probability, "attn_pdrop": _probability,
    # Llama-style (LlamaConfig and its kin)
    "num_hidden_layers": _count_field, "num_attention_heads": _count_field, "num_key_value_heads": _count_field,
    "hidden_size": _width_field, "head_dim": _width_field, "intermediate_size": _width_field,
    "vocab_size": _width_field, "max_position_embeddings": HfField("whole", 1, _POSITIONS),
    "attention_dropout": _probability,
    "tie_word_embeddings": _flag_field, "attention_bias": _flag_field, "mlp_bias": _flag_field,
    "rope_scaling": HfField("object"), "rope_parameters": HfField("object"),
    "rope_scaling.factor": HfField("number", 0, _COUNTS, above=True),
    "rope_scaling.original_max_position_embeddings": HfField("whole", 1, _POSITIONS),
    "rope_scaling.rope_type": HfField("text"), "rope_scaling.type": HfField("text"),
    "rope_parameters.factor": HfField("number", 0, _COUNTS, above=True),
    "rope_parameters.original_max_position_embeddings": HfField("whole", 1, _POSITIONS),
    "rope_parameters.rope_type": HfField("text"),
    # sliding windows (Mistral, Qwen, Gemma): 0 or null is no window
    "sliding_window": HfField("whole", 0, _POSITIONS), "use_sliding_window": _flag_field,
    "max_window_layers": HfField("whole", 0, _COUNTS), "layer_types": HfField("names"),
    "sliding_window_pattern": _count_field,
    # MoE: Mixtral, Qwen MoE, DeepSeek
    "num_local_experts": _count_field, "num_experts": _count_field, "num_experts_per_tok": _count_field,
    "n_routed_experts": _count_field, "n_shared_experts": HfField("whole", 0, _COUNTS),
    "moe_intermediate_size": _width_field, "shared_expert_intermediate_size": _width_field,
    "first_k_dense_replace": HfField("whole", 0, _COUNTS), "decoder_sparse_step": _count_field,
    "mlp_only_layers": HfField("names"), "norm_topk_prob": _flag_field, "qkv_bias": _flag_field,
    "topk_method": HfField("text", choices=("greedy", "group_limited_greedy", "noaux_tc")),
    # Phi-3 (transformers 5.23 configuration_phi3.py Phi3Config): the rotary share of a head, read to be refused below 1
    "partial_rotary_factor": HfField("number", 0, 1, above=True),
    "rope_scaling.partial_rotary_factor": HfField("number", 0, 1, above=True),
    "rope_parameters.partial_rotary_factor": HfField("number", 0, 1, above=True),
    # DeepSeek's latent attention: 0 or null q_lora_rank is one q_proj
    "kv_lora_rank": _width_field, "q_lora_rank": HfField("whole", 0, _WIDTHS), "qk_rope_head_dim": _width_field,
    "qk_nope_head_dim": _width_field, "v_head_dim": _width_field,
    # A checkpoint published quantised (checkpoint_quantization_of)
    "quantization_config": HfField("object"), "quantization_config.quant_method": HfField("text"),
    "quantization_config.modules_to_not_convert": HfField("names"),
}


def _checked_value(field: str, value: Any, spec: HfField) -> None:
    """ConfigFieldError naming `field` where `value` (not null) is not what `spec` accepts."""
    shown = clip_value(value)
    if spec.kind == "whole":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _field_error(field, f"must be a whole number (a JSON integer) from {spec.low:,} to {spec.high:,}, "
                                      f"got {shown}")
        if not spec.low <= value <= spec.high:
            limit = f"at least {spec.low:,}" if value < spec.low else f"at most {spec.high:,}"
            raise _field_error(field, f"must be {limit}, got {value:,}" if abs(value) < 10**30 else
                               f"must be {limit}, got a number of {len(str(abs(value)))} digits")
    elif spec.kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise _field_error(field, f"must be a finite number, got {shown}")
        if not (spec.low < value if spec.above else spec.low <= value) or value > spec.high:
            raise _field_error(field, f"must be {'above' if spec.above else 'from'} {spec.low:g} "
                                      f"{'and at most' if spec.above else 'to'} {spec.high:g}, got {value:g}")
    elif spec.kind == "flag":
        if not isinstance(value, bool):
            raise _field_error(field, f"must be true or false, got {shown}")
    elif spec.kind == "text":
        if not isinstance(value, str) or (spec.choices and value not in spec.choices):
            allowed = f"one of {', '.join(spec.choices)}" if spec.choices else "text"
            raise _field_error(field, f"must be {allowed}, got {shown}")
    elif spec.kind == "object":
        if not isinstance(value, dict):
            raise _field_error(field, f"must be an object or null, got {shown}")
    elif spec.kind == "names" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise _field_error(field, f"must be a list of names or null, got {clip_value(value)}")


def clip_value(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 40 else text[:20] + "..."


def check_values(config: dict[str, Any]) -> None:
    """ConfigFieldError naming the first field of HF_FIELDS (a nested one under its object) whose value it does not
    accept; null is not given."""
    for field, spec in HF_FIELDS.items():
        outer, _, inner = field.partition(".")
        holder = config.get(outer) if inner else config
        key = inner or outer
        if isinstance(holder, dict) and holder.get(key) is not None:
            _checked_value(field, holder[key], spec)


# transformers 5.23 Phi3Config.validate_rope takes the default rotary and longrope ('su' and 'yarn' read as longrope)
# only.
_LONGROPE = ("a rotary scaling: Phi-3's longrope makes vLLM keep short and long cos/sin tables, not the one table "
             "modelled (and transformers' Phi3Config takes no other)")
# config.json fields that change memory in ways the model does not follow: refused by name, never silently
# ignored. (model types or None for all, field, refused when (value, whole config), what the field would change).
UNMODELLED_FIELDS: tuple[tuple[tuple[str, ...] | None, str, Any, str], ...] = (
    (_ROTARY, "hidden_act", lambda v, c: v not in ("silu", "swish"),
     "an MLP activation other than SiLU (the gated MLP is modelled with SiLU, as transformers' Llama code has it)"),
    (("gpt2",), "reorder_and_upcast_attn", _truthy, "attention scores upcast to fp32 before the softmax"),
    (("gpt2",), "add_cross_attention", _truthy, "cross-attention layers"),
    (("gpt2",), "scale_attn_by_inverse_layer_idx", _truthy, "attention scores scaled per layer (one more s x s tensor)"),
    (("mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss"), "output_router_logits", _truthy,
     "the router logits every layer keeps for the auxiliary load-balancing loss"),
    (_DEEPSEEK, "moe_layer_freq", lambda v, c: v not in (None, 1), "MoE layers only every few layers"),
    (_DEEPSEEK, "num_nextn_predict_layers", _truthy,
     "multi-token-prediction layers (DeepSeek-V3's MTP module, loaded for speculative decoding only)"),
    (("gemma2", "gemma3_text"), "hidden_activation", lambda v, c: v not in (None, "gelu_pytorch_tanh"),
     "an MLP activation other than Gemma's tanh GeLU"),
    # Gemma 3 (transformers 5.23 configuration_gemma3.py, modeling_gemma3.py): rope_scaling scales the full-attention
    # layers' rotary table only (Gemma 3 4B and larger: linear x 8), softcapping adds tensors to the scores and the
    # logits, and bidirectional attention (EmbeddingGemma) halves the window: none is in the counts.
    (("gemma3_text",), "rope_scaling", lambda v, c: v is not None,
     "a rotary scaling of the full-attention layers alone (their table longer than the sliding layers')"),
    (("gemma3_text",), "attn_logit_softcapping", lambda v, c: v is not None, "the attention scores softcapped"),
    (("gemma3_text",), "final_logit_softcapping", lambda v, c: v is not None, "the logits softcapped"),
    (("gemma3_text",), "use_bidirectional_attention", _truthy, "bidirectional attention (an encoder's)"),
    # Phi-3 and Phi-4 (transformers 5.23 models/phi3/modeling_phi3.py, configuration_phi3.py). partial_rotary_factor
    # below 1 (Phi-4-mini: 0.75) rotates part of each head, and vLLM's and SGLang's rotary table is that part wide;
    # longrope (Phi-3.5-mini, Phi-3-mini-128k, Phi-4-mini) makes vLLM keep short and long tables side by side
    # (vllm rotary_embedding Phi3LongRoPEScaledRotaryEmbedding: short_cos_sin_cache of original_max_position_embeddings
    # rows, long_cos_sin_cache of max_position_embeddings rows and long_short_cos_sin_cache, their concatenation);
    # resid_pdrop > 0 adds Phi3DecoderLayer's two residual dropouts (resid_attn_dropout, resid_mlp_dropout), whose
    # masks transformers' Llama-style op list has no row for. Every released Phi-3 and Phi-4 config.json sets
    # resid_pdrop 0.0; embd_pdrop is read by no module of modeling_phi3.py.
    (("phi3",), "partial_rotary_factor", lambda v, c: v not in (None, 1, 1.0),
     "a rotary part of each head narrower than the head (the rotary table as wide as that part)"),
    # transformers' Phi3Attention and Phi3MLP build every projection with bias=False whatever the config says, where
    # vLLM's Phi3ForCausalLM (a LlamaForCausalLM) reads attention_bias: a biased config would be two models.
    (("phi3",), "attention_bias", _truthy, "biases on the attention projections, which transformers' Phi3Attention "
                                           "does not build (bias=False) and vLLM's does"),
    (("phi3",), "mlp_bias", _truthy, "biases on the MLP projections, which transformers' Phi3MLP does not build"),
    (("phi3",), "resid_pdrop", lambda v, c: bool(v), "the residual dropouts after attention and after the MLP "
                                                     "(Phi3DecoderLayer resid_attn_dropout, resid_mlp_dropout)"),
)
# The dropout probabilities transformers' code reads, by model type: the hidden-state dropouts (one setting is
# modelled, so they must agree) and the attention dropout, which saves an s x s mask under eager attention only
# (fused kernels keep a random seed): `attention_dropout_differs` lets the command line refuse eager attention then.
HIDDEN_DROPOUTS = {"gpt2": ("resid_pdrop", "embd_pdrop")}
ATTENTION_DROPOUT = {"gpt2": "attn_pdrop"}


def check_fields(config: dict[str, Any], model_type: str) -> None:
    """Raise ValueError naming the first config.json field that changes memory in a way not modelled."""
    for types, key, refused, what in UNMODELLED_FIELDS:
        if (types is None or model_type in types) and key in config and refused(config[key], config):
            raise ConfigFieldError(key, f"config.json ({model_type}) field {key!r} = {clip_value(config[key])} changes "
                                        f"memory in a way this model does not follow: {what}")


def check_phi3_rope(config: dict[str, Any]) -> None:
    """ConfigFieldError naming the field of a Phi-3 rotary object (rope_scaling, or transformers 5's rope_parameters)
    that asks for what is not modelled: a partial rotary factor below 1, or a rotary type other than the default
    (UNMODELLED_FIELDS has the sources)."""
    for key in ("rope_scaling", "rope_parameters"):
        scaling = config.get(key)
        if not isinstance(scaling, dict):
            continue
        refused = [("partial_rotary_factor", "a rotary part of each head narrower than the head")] \
            if scaling.get("partial_rotary_factor") not in (None, 1, 1.0) else []
        refused += [(name, _LONGROPE) for name in ("rope_type", "type") if scaling.get(name) not in (None, "default")]
        for name, what in refused[:1]:
            raise ConfigFieldError(f"{key}.{name}", f"config.json (phi3) field '{key}.{name}' = "
                                                    f"{clip_value(scaling[name])} changes memory in a way this model "
                                                    f"does not follow: {what}")


def dropout_of(config: dict[str, Any], model_type: str) -> dict[str, bool]:
    """Whether training runs dropout, from the probabilities above 0 (transformers' defaults: GPT-2 0.1 each, the
    others' attention_dropout 0.0): {'dropout': ..., 'attention_dropout_differs': ...}. GPT-2's hidden dropouts
    must agree (one dropout setting is modelled)."""
    default = 0.1 if model_type == "gpt2" else 0.0
    prob = lambda key: float(config.get(key, default) or 0)  # noqa: E731 - one lookup
    hidden = {key: prob(key) for key in HIDDEN_DROPOUTS.get(model_type, ())}
    if len({value > 0 for value in hidden.values()}) > 1:
        shown = ", ".join(f"{k} {v:g}" for k, v in hidden.items())
        raise ConfigFieldError(next(iter(hidden)), f"config.json ({model_type}) sets some dropouts and not others "
                               f"({shown}); one dropout setting is modelled")
    attention = prob(ATTENTION_DROPOUT.get(model_type, "attention_dropout")) > 0
    on = any(value > 0 for value in hidden.values()) if hidden else attention
    return {"dropout": on, "attention_dropout_differs": attention != on}


def rope_positions_of(config: dict[str, Any]) -> int:
    """Rows of the rotary cos/sin table vLLM and SGLang build (get_rope, vllm rotary_embedding/__init__.py and its
    classes): original_max_position_embeddings x factor under YaRN (DeepSeek's too); max_position_embeddings x factor
    under linear and dynamic NTK scaling; max_position_embeddings otherwise (llama3's scaling keeps the rows)."""
    key = "rope_scaling" if config.get("rope_scaling") else "rope_parameters"
    scaling = config.get(key) or {}
    if not isinstance(scaling, dict):
        raise ValueError(f"config.json field {key!r} must be an object, got {scaling!r}")
    if scaling and all(isinstance(value, dict) for value in scaling.values()):
        raise ValueError(f"config.json field {key!r} sets rotary parameters per layer type; one setting for every "
                         "layer is modelled")
    kind, factor = scaling.get("rope_type") or scaling.get("type") or "default", scaling.get("factor")
    rows = config.get("max_position_embeddings") or 0
    if kind in ("yarn", "deepseek_yarn"):
        rows = scaling.get("original_max_position_embeddings") or rows
    for name, value in (("max_position_embeddings", rows), (f"{key}.factor", factor or 1)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1 << 40:
            raise ValueError(f"config.json field {name!r} must be a non-negative number, got {value!r}")
    return int(rows * factor) if factor and kind in ("yarn", "deepseek_yarn", "linear", "dynamic") else int(rows)


def context_positions_of(config: dict[str, Any]) -> int:
    """SGLang's own length where it is not the rotary table's rows (rope_positions_of), else 0. SGLang's
    get_context_length (python/sglang/srt/utils/hf_transformers_utils.py, commit 2aa2e2d) multiplies
    max_position_embeddings by the scaling factor unless rope_scaling names original_max_position_embeddings or is
    llama3's: with an original it takes
    max_position_embeddings as it stands, where vLLM (and the table) take original x factor under YaRN and
    max_position_embeddings x factor under dynamic scaling. Qwen3 with YaRN switched on (40,960 positions, original
    32,768, factor 4): SGLang 40,960, vLLM 131,072. (SGLang reads max_sequence_length, seq_length, max_seq_len and
    model_max_length before max_position_embeddings, and scales by the factor for any rope type without an
    original, longrope among them, which the table's rows do not: a config.json with those is a simplification here.)"""
    scaling = config.get("rope_scaling") or config.get("rope_parameters") or {}
    if not isinstance(scaling, dict) or "original_max_position_embeddings" not in scaling:
        return 0
    own = config.get("max_position_embeddings") or 0
    return own if own and own != rope_positions_of(config) else 0


def sliding_window_of(config: dict[str, Any], model_type: str) -> int | None:
    """The attention window every layer uses, or None (full attention); a mix of kinds is refused by name.
    transformers: `layer_types` where given; else Mistral slides when sliding_window is set, and Qwen models
    when use_sliding_window holds, in the layers from max_window_layers on."""
    window = config.get("sliding_window")
    kinds = set(config.get("layer_types") or ())
    if kinds:
        if kinds == {"full_attention"}:
            return None
        if not window and "sliding_attention" in kinds:
            raise _field_error("sliding_window", f"layer_types has sliding_attention layers, which need a window of "
                                                 f"at least 1 token, got {window!r}")
        if kinds == {"sliding_attention"} and window:
            return int(window)
        if kinds == {"sliding_attention", "full_attention"} and window and sliding_window_pattern_of(config):
            return int(window)
        raise ConfigFieldError("layer_types", f"config.json ({model_type}) field 'layer_types' mixes "
                               f"{', '.join(sorted(kinds))} in a way other than every Nth layer full: layers of more "
                               "than one attention kind are modelled only in a regular pattern")
    if not window:
        return None
    if model_type in _QWEN:
        if not config.get("use_sliding_window", False):
            return None
        first = config.get("max_window_layers")
        first = 28 if first is None else int(first)  # null: not given, Qwen2Config's default
        layers = int(config["num_hidden_layers"])
        if first >= layers:
            return None
        if first > 0:
            raise ConfigFieldError("max_window_layers", f"config.json ({model_type}) field 'max_window_layers' = "
                                   f"{first}: a sliding window in layers {first} to {layers - 1} only is not modelled")
    return int(window) if model_type != "gpt2" else None


def sliding_window_pattern_of(config: dict[str, Any]) -> int:
    """N when `layer_types` makes every Nth layer full attention and the others slide (transformers' Gemma 2:
    2, Gemma 3: 6), else 0. Gemma 2's config gives no layer_types: its code slides in the even layers."""
    types = list(config.get("layer_types") or ())
    if not types and config.get("model_type") == "gemma2" and config.get("sliding_window"):
        return 2
    full = [i for i, kind in enumerate(types) if kind == "full_attention"]
    if not full or len(full) == len(types):
        return 0
    n = full[0] + 1
    expected = ["full_attention" if (i + 1) % n == 0 else "sliding_attention" for i in range(len(types))]
    return n if types == expected else 0


def gemma3_text(config: dict[str, Any]) -> dict[str, Any]:
    """A Gemma 3 config.json as transformers 5.23 reads it (configuration_gemma3.py Gemma3TextConfig): layer_types, where
    not given, from sliding_window_pattern (default 6: five sliding layers, then a full one); rope_parameters given
    per layer type (how transformers 5 saves it) taken as one setting where both kinds are unscaled, the thetas
    (rope_theta, rope_local_base_freq: the rotary tables' values, not their size) aside. query_pre_attn_scalar only
    scales the scores."""
    config = dict(config)
    pattern = config.get("sliding_window_pattern", 6)
    if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
        raise _field_error("sliding_window_pattern", f"must be a whole number of at least 1, got {pattern!r}")
    if not config.get("layer_types"):
        layers = config.get("num_hidden_layers")
        if isinstance(layers, int) and not isinstance(layers, bool) and 0 < layers <= 1 << 16:
            config["layer_types"] = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                                     for i in range(layers)]
    kinds = config.get("rope_parameters")
    if isinstance(kinds, dict) and kinds and all(isinstance(value, dict) for value in kinds.values()):
        if any((value.get("rope_type") or "default") != "default" for value in kinds.values()):
            raise ValueError("config.json (gemma3_text) field 'rope_parameters' scales a layer type's rotary table, "
                             "which this model does not follow: one unscaled table a layer type is modelled")
        del config["rope_parameters"]
    return config


# The modules a checkpoint may name as left unquantised (quantization_config's ignored_layers, or
# modules_to_not_convert: vLLM's Fp8Config.from_config reads either) that the model keeps 16-bit anyway: the output
# layer, the token embedding and the MoE router ("gate"). Any other list is refused by name.
_KEPT_16_BIT = ("lm_head", "embed_tokens", "gate")


def checkpoint_quantization_of(config: dict[str, Any]) -> dict[str, Any]:
    """The Architecture fields of a config.json's quantization_config ({} without one): its quant_method, one the
    model follows (builder.model.serving.CHECKPOINT_QUANTIZATIONS), and weight_block_size (one scale a tensor without
    it). An fp8 checkpoint may name only the output layer, the embedding and the router as left unquantised; gpt-oss's
    own list is gpt_oss's to check. ConfigFieldError naming the field the model does not follow."""
    quant = config.get("quantization_config")
    if quant is None:
        return {}
    method = quant.get("quant_method")
    if method is None:
        raise _field_error("quantization_config.quant_method", "must be given with a quantization_config (the "
                           f"checkpoint's format: {', '.join(CHECKPOINT_QUANTIZATIONS)}), got null")
    if method not in CHECKPOINT_QUANTIZATIONS:
        raise _field_error("quantization_config.quant_method",
                           f"{clip_value(method)} is a checkpoint format this model does not follow (it follows "
                           f"{', '.join(CHECKPOINT_QUANTIZATIONS)}); give the weights' dtype with --precision when "
                           "serving, or --qlora for 4-bit training")
    block = quant.get("weight_block_size")
    if block is not None and not (isinstance(block, list) and len(block) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= _WIDTHS for v in block)):
        raise _field_error("quantization_config.weight_block_size", "must be two whole numbers from 1 to "
                           f"{_WIDTHS:,} (the rows and columns of a block sharing one scale) or null, got "
                           f"{clip_value(block)}")
    for key in ("ignored_layers", "modules_to_not_convert") if method == "fp8" else ():
        names = quant.get(key)
        if names and not (isinstance(names, list) and all(
                isinstance(name, str) and name.rsplit(".", 1)[-1] in _KEPT_16_BIT for name in names)):
            raise _field_error(f"quantization_config.{key}", "names layers left unquantised beyond the output layer, "
                               "the embedding and the router, which this model does not follow, got "
                               f"{clip_value(names)}")
    return {"checkpoint_quantization": method, "checkpoint_block": tuple(block) if block else (0, 0)}


def gpt_oss(config: dict[str, Any]) -> dict[str, Any]:
    """A gpt-oss config.json as transformers 5.23 reads it (configuration_gpt_oss.py GptOssConfig.__post_init__):
    layer_types, where not given, alternating sliding_attention and full_attention from the first layer on (the
    released configs list the same), and the YaRN rotary scaling (factor 32 over 4,096 positions) where neither
    rope_scaling nor rope_parameters is given.

    A quantization_config is taken where it is gpt-oss's own (openai/gpt-oss-20b and -120b config.json: quant_method
    'mxfp4', modules_to_not_convert the attention, the router, the embeddings and lm_head): the routed experts'
    gate_up_proj and down_proj as MXFP4 blocks and scales, everything else bf16. transformers 5.23's Mxfp4HfQuantizer
    quantises GptOssExperts alone (quantizers/quantizer_mxfp4.py param_needs_quantization), so another method, or a
    list that keeps the experts unconverted, is another layout: refused by name."""
    config = dict(config)
    quantization = config.get("quantization_config")
    if quantization is not None:
        if quantization.get("quant_method") != "mxfp4":
            raise _field_error("quantization_config.quant_method",
                               f"gpt-oss's pre-quantised layout is mxfp4 (its MoE experts' weights as MXFP4), the one "
                               f"modelled, got {clip_value(quantization.get('quant_method'))}")
        kept = [name for name in quantization.get("modules_to_not_convert") or () if "experts" in name]
        if kept:
            raise _field_error("quantization_config.modules_to_not_convert",
                               f"keeps the experts unquantised ({clip_value(kept[0])}), a layout other than "
                               "gpt-oss's MXFP4 experts; not modelled")
    if not config.get("layer_types"):
        layers = config.get("num_hidden_layers")
        if isinstance(layers, int) and not isinstance(layers, bool) and 0 < layers <= 1 << 16:
            config["layer_types"] = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    config.setdefault("sliding_window", 128)
    if not config.get("rope_scaling") and not config.get("rope_parameters"):
        config["rope_parameters"] = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096}
    return config


def _deepseek(config: dict[str, Any], need: Any) -> dict[str, Any]:
    """The latent attention and MoE fields of a DeepSeek-V2/V3 config.json (transformers modeling_deepseek_v2.py,
    modeling_deepseek_v3.py): head_dim is the query/key width qk_nope_head_dim + qk_rope_head_dim."""
    rope = need("qk_rope_head_dim")
    fields = dict(kv_lora_rank=need("kv_lora_rank"), qk_rope_head_dim=rope, q_lora_rank=config.get("q_lora_rank") or 0,
                  head_dim=need("qk_nope_head_dim") + rope, v_head_dim=need("v_head_dim"))
    if config.get("n_routed_experts"):
        fields.update(experts=need("n_routed_experts"), top_k=need("num_experts_per_tok"),
                      shared_experts=config.get("n_shared_experts") or 0, expert_ffn=need("moe_intermediate_size"),
                      first_dense_layers=config.get("first_k_dense_replace") or 0,
                      router_bias=config.get("topk_method") == "noaux_tc", moe_block=config["model_type"])
        # transformers 5.23 DeepseekV2TopkRouter.forward never renormalises the top-k weights (norm_topk_prob is
        # read by DeepSeek-V3's router only) and limits the routing to the best groups for topk_method
        # 'group_limited_greedy'; DeepseekV3TopkRouter.forward renormalises when norm_topk_prob (default True).
        if config["model_type"] == "deepseek_v2":
            fields.update(norm_topk=False, group_limited=config.get("topk_method") == "group_limited_greedy")
        else:
            fields.update(norm_topk=bool(config.get("norm_topk_prob", True)))
    return fields


def from_hf_config(config: dict[str, Any], name: str = "custom") -> Architecture:
    """Build an Architecture from a Hugging Face `config.json` dictionary.

    Supports model_type gpt2, llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v2, deepseek_v3,
    gemma2, gemma3_text, gpt_oss and phi3 (the families whose modeling code this module's counts follow). Raises
    ValueError naming the missing key.
    """
    model_type = config.get("model_type")
    if model_type not in _HF_FAMILIES:
        known = ", ".join(sorted(_HF_FAMILIES))
        raise ValueError(f"config.json model_type {model_type!r} is not supported (supported: {known})")

    def need(key: str) -> Any:
        if key in given and given[key] is None:
            raise _field_error(key, f"must be given ({model_type} needs it), got null")
        if key not in config:
            raise ValueError(f"config.json ({model_type}) is missing {key!r}")
        return config[key]

    check_values(config)
    # A field set to null is one not given (transformers' default), unless the model needs it (need).
    given, config = config, {key: value for key, value in config.items() if value is not None}
    check_fields(config, model_type)
    if model_type == "phi3":
        check_phi3_rope(config)
    if model_type == "gemma3_text":
        config = gemma3_text(config)
    if model_type == "gpt_oss":
        config = gpt_oss(config)
    extra = dropout_of(config, model_type)

    if model_type == "gpt2":
        hidden = need("n_embd")
        return Architecture(
            name=name, family="gpt2", layers=need("n_layer"), hidden=hidden, heads=need("n_head"),
            vocab=need("vocab_size"), ffn=config.get("n_inner") or 4 * hidden, mlp="gelu",
            norm="layernorm", qkv_bias=True, out_bias=True, mlp_bias=True,
            tied_embeddings=config.get("tie_word_embeddings", True), positions="learned",
            max_positions=need("n_positions"),
            activation=_gelu_kind(config.get("activation_function", "gelu_new")), extra=extra,
            **checkpoint_quantization_of(config),
        )
    hidden = need("hidden_size")
    heads = need("num_attention_heads")
    arch = dict(
        name=name, family=_HF_FAMILIES[model_type], layers=need("num_hidden_layers"), hidden=hidden, heads=heads,
        kv_heads=config.get("num_key_value_heads") or heads,
        head_dim=config.get("head_dim") or hidden // heads,
        vocab=need("vocab_size"), ffn=need("intermediate_size"), mlp="swiglu", norm="rmsnorm",
        qkv_bias=bool(config.get("attention_bias", model_type == "qwen2")),
        out_bias=bool(config.get("attention_bias", False)),
        mlp_bias=bool(config.get("mlp_bias", False)),
        tied_embeddings=bool(config.get("tie_word_embeddings", False)), positions="rotary",
        max_position_embeddings=rope_positions_of(config), config_positions=context_positions_of(config),
        activation="silu", qk_norm=model_type in ("qwen3", "qwen3_moe", "gemma3_text"), extra=extra,
        **checkpoint_quantization_of(config),
    )
    window = sliding_window_of(config, model_type)
    if window:
        arch["sliding_window"] = window
        arch["sliding_window_pattern"] = sliding_window_pattern_of(config)
    if model_type in _DEEPSEEK:
        arch.update(_deepseek(config, need))
    if model_type == "gemma2":
        # Gemma 2 (transformers modeling_gemma2.py): tied embeddings, four RMSNorms a block, a GeGLU MLP.
        arch.update(tied_embeddings=bool(config.get("tie_word_embeddings", True)), sandwich_norms=True)
    if model_type == "gemma3_text":
        # Gemma 3 (transformers modeling_gemma3.py): Gemma 2's block with q_norm and k_norm (above), a GeGLU MLP with
        # the tanh GeLU.
        arch.update(tied_embeddings=bool(config.get("tie_word_embeddings", True)), sandwich_norms=True,
                    activation="gelu_tanh")
    if model_type == "phi3":
        # Phi-3 and Phi-4 (transformers 5.23 models/phi3/modeling_phi3.py): Phi3Attention.qkv_proj, one
        # nn.Linear(h, (a + 2k) d) sliced into q, k and v, and Phi3MLP.gate_up_proj, one nn.Linear(h, 2f) chunked into
        # gate and up, no biases; the same parameters as Llama's separate projections, in two tensors fewer.
        arch.update(fused_projections=True, qkv_bias=False, out_bias=False, mlp_bias=False)
    if model_type == "mixtral":
        arch.update(experts=need("num_local_experts"), top_k=need("num_experts_per_tok"),
                    expert_ffn=need("intermediate_size"), moe_block="mixtral")
    if model_type == "gpt_oss":
        # gpt-oss (transformers 5.23 models/gpt_oss/modeling_gpt_oss.py): every layer an MoE layer of
        # num_local_experts experts of intermediate_size, biased (GptOssExperts' gate_up_proj_bias and
        # down_proj_bias), routed by a biased Linear whose top-k logits are softmaxed (GptOssTopKRouter.forward: no
        # renormalisation), q/k/v/o biases (attention_bias, True by default), a learned sink per query head
        # (GptOssAttention.sinks), untied embeddings; the released checkpoints' experts are MXFP4 (gpt_oss_mxfp4).
        arch.update(ffn=0, experts=need("num_local_experts"), top_k=need("num_experts_per_tok"),
                    expert_ffn=need("intermediate_size"), moe_block="gpt_oss", norm_topk=False, router_bias=True,
                    mlp_bias=True, attention_sinks=True,
                    qkv_bias=bool(config.get("attention_bias", True)), out_bias=bool(config.get("attention_bias", True)))
    if model_type in ("qwen2_moe", "qwen3_moe"):
        # Every layer is an MoE layer (decoder_sparse_step 1, no mlp_only_layers) in the released Qwen MoE models.
        if config.get("mlp_only_layers") or config.get("decoder_sparse_step") not in (None, 1):
            raise ConfigFieldError("mlp_only_layers" if config.get("mlp_only_layers") else "decoder_sparse_step",
                                   f"config.json ({model_type}): dense layers among MoE layers (mlp_only_layers, "
                                   "decoder_sparse_step) are not modelled")
        # transformers 5.23 Qwen2MoeTopKRouter / Qwen3MoeTopKRouter renormalise when norm_topk_prob, False by default
        # in both configurations (configuration_qwen2_moe.py, configuration_qwen3_moe.py; Qwen3-30B-A3B's config.json
        # sets it True).
        arch.update(ffn=0, experts=need("num_experts"), top_k=need("num_experts_per_tok"),
                    expert_ffn=need("moe_intermediate_size"), moe_block=model_type,
                    norm_topk=bool(config.get("norm_topk_prob", False)))
    if model_type == "qwen2_moe":
        # modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock: one shared expert MLP of shared_expert_intermediate_size,
        # counted as that width over the routed experts' (Qwen1.5-MoE-A2.7B: 5632 = 4 x 1408), and q/k/v biases
        # (configuration_qwen2_moe.py qkv_bias, default True).
        width, shared = need("moe_intermediate_size"), need("shared_expert_intermediate_size")
        if shared % width:
            raise ValueError(f"config.json (qwen2_moe): shared_expert_intermediate_size {shared} is not a multiple of "
                             f"moe_intermediate_size {width}; shared experts are modelled as whole experts")
        arch.update(shared_experts=shared // width, qkv_bias=bool(config.get("qkv_bias", True)))
    return Architecture(**arch)


def _gelu_kind(activation_function: str) -> str:
    """Map a transformers `activation_function` name to how it is computed."""
    python_tanh = {"gelu_new", "gelu_fast", "gelu_python"}
    return "gelu_tanh_python" if activation_function in python_tanh else "gelu_fused"
