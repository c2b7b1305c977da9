"""The measured cases, as plain data (no torch here).

An ActivationCase fixes everything one forward pass depends on; `hf_config` turns it into
the Hugging Face `config.json` dictionary the measurement builds its model from, which is
also what `builder.model.from_hf_config` reads when the comparison predicts the same case.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

FAMILIES = ("gpt2", "llama", "qwen2", "qwen3", "mistral", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2",
            "deepseek_v3", "gpt_oss", "phi3")
# transformers' MoE families (builder.model.oplists._HF_MOE).
MOE_FAMILIES = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss")
DTYPES = {"float32": "fp32", "bfloat16": "bf16"}  # torch dtype name -> short name / Config precision
# Dropout probability used when a case has dropout on (GPT-2's default resid/embd/attn_pdrop).
DROPOUT_P = 0.1


@dataclass(frozen=True)
class ActivationCase:
    """One forward pass: a model shape, a workload and the switches that change what is saved."""

    family: str
    attention: str = "eager"  # attn_implementation: 'eager' or 'sdpa'
    dtype: str = "float32"  # dtype the model is built in: 'float32' or 'bfloat16'
    batch: int = 2
    seq_len: int = 64
    hidden: int = 64
    heads: int = 4
    kv_heads: int | None = None  # None: same as heads (GPT-2 has no GQA)
    ffn: int | None = None  # None: 4*hidden for GPT-2, 176 for the Llama-style families
    vocab: int = 256
    recompute: str = "none"  # 'none' or 'full' (gradient checkpointing of every layer)
    dropout: bool = False
    experts: int = 0  # MoE: routed experts per layer
    top_k: int = 0  # MoE: experts per token
    shared_experts: int = 0  # MoE (Qwen2-MoE, DeepSeek): shared experts of the routed experts' width
    norm_topk: bool = True  # MoE (Qwen, DeepSeek-V3): norm_topk_prob
    groups: int = 0  # MoE (DeepSeek): n_group (> 0 on DeepSeek-V2: topk_method 'group_limited_greedy'), topk_group 1
    q_lora_rank: int = 0  # DeepSeek's latent attention: the query's low rank (q_a_proj, q_a_layernorm, q_b_proj); 0: q_proj
    first_dense: int = 0  # MoE (DeepSeek): first_k_dense_replace, the first layers with a dense MLP of width `ffn_dense`
    autocast: bool = False  # forward under torch.autocast(bfloat16) over a float32 model (the amp-bf16 policy)
    compile: bool = False  # every layer under torch.compile (inductor, the default backend; builder.validate.measure)
    padded: bool = False  # every sequence but the first padded on the right from seq_len // 2 (an attention_mask)
    sliding_window: int = 0  # Mistral, Phi-3: config.json's sliding_window, every layer (0: none)

    @property
    def name(self) -> str:
        """Deterministic id, e.g. 'gpt2-eager-fp32-b2-s64-h64-a4-v256-none-nodrop'."""
        parts = [self.family, self.attention, DTYPES[self.dtype], f"b{self.batch}", f"s{self.seq_len}",
                 f"h{self.hidden}", f"a{self.heads}"]
        if self.kv_heads is not None and self.family != "gpt2":
            parts.append(f"kv{self.kv_heads}")
        if self.ffn is not None:
            parts.append(f"f{self.ffn}")
        if self.experts:
            parts.append(f"e{self.experts}k{self.top_k}")
            parts += [f"sh{self.shared_experts}"] if self.shared_experts else []
            parts += [f"g{self.groups}"] if self.groups else []
            parts += ["nonorm"] if not self.norm_topk else []
        if self.q_lora_rank:
            parts.append(f"q{self.q_lora_rank}")
        if self.first_dense:
            parts.append(f"fd{self.first_dense}")
        parts += [f"v{self.vocab}", self.recompute, "drop" if self.dropout else "nodrop"]
        if self.autocast:
            parts.append("amp")
        if self.compile:
            parts.append("compiled")
        if self.padded:
            parts.append("padded")
        if self.sliding_window:
            parts.append(f"w{self.sliding_window}")
        return "-".join(parts)

    @property
    def inner(self) -> int:
        """The MLP inner width actually used."""
        if self.ffn is not None:
            return self.ffn
        return 4 * self.hidden if self.family == "gpt2" else 176

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready inputs (sliding_window only where a case has one)."""
        data = asdict(self)
        if not self.sliding_window:
            del data["sliding_window"]
        return data

    def with_changes(self, **changes: Any) -> "ActivationCase":
        """A copy with some fields replaced."""
        return replace(self, **changes)


def attention_dropout(case: ActivationCase) -> float:
    """Dropout on attention probabilities.

    0 for 'sdpa': CPU SDPA supports dropout only in its math fallback (which saves the
    s x s matrices that CUDA flash/efficient kernels do not; they save a philox seed and
    offset instead, 16 bytes), so measuring it on CPU would not describe a GPU run.
    """
    return DROPOUT_P if case.dropout and case.attention == "eager" else 0.0


def hf_config(case: ActivationCase, layers: int) -> dict[str, Any]:
    """The Hugging Face config.json dictionary for `case` with `layers` blocks."""
    hidden_dropout = DROPOUT_P if case.dropout else 0.0
    if case.family == "gpt2":
        return {
            "model_type": "gpt2", "n_layer": layers, "n_embd": case.hidden, "n_head": case.heads,
            "n_inner": case.inner, "vocab_size": case.vocab, "n_positions": max(case.seq_len, 64),
            "activation_function": "gelu_new", "resid_pdrop": hidden_dropout, "embd_pdrop": hidden_dropout,
            "attn_pdrop": attention_dropout(case), "tie_word_embeddings": True,
            "bos_token_id": 0, "eos_token_id": 0, "attn_implementation": case.attention,
        }
    config = {
        "model_type": case.family, "num_hidden_layers": layers, "hidden_size": case.hidden,
        "num_attention_heads": case.heads, "num_key_value_heads": case.kv_heads or case.heads,
        "head_dim": case.hidden // case.heads, "intermediate_size": case.inner, "vocab_size": case.vocab,
        "max_position_embeddings": max(case.seq_len, 64), "attention_dropout": attention_dropout(case),
        "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": None,
        "attn_implementation": case.attention,
    }
    if case.family in ("mistral", "mixtral"):
        config["sliding_window"] = case.sliding_window or None
    if case.family in ("qwen2", "qwen3"):
        config["use_sliding_window"] = False
    if case.family == "phi3":
        # Phi-3 (transformers configuration_phi3.py): no window, and the residual dropouts (resid_pdrop) off, as in
        # every released Phi-3 and Phi-4 config.json; embd_pdrop is read by no module of modeling_phi3.py.
        config.update(sliding_window=case.sliding_window or None, resid_pdrop=0.0, embd_pdrop=0.0)
    if case.family == "mixtral":
        config.update(num_local_experts=case.experts, num_experts_per_tok=case.top_k, router_jitter_noise=0.0)
    if case.family in ("qwen2_moe", "qwen3_moe"):
        # Every layer an MoE layer; intermediate_size (the dense MLP of mlp_only_layers) is then unused.
        config.update(num_experts=case.experts, num_experts_per_tok=case.top_k, moe_intermediate_size=case.inner,
                      norm_topk_prob=case.norm_topk, decoder_sparse_step=1, mlp_only_layers=[],
                      use_sliding_window=False, sliding_window=None)
        if case.family == "qwen2_moe":
            config["shared_expert_intermediate_size"] = case.shared_experts * case.inner
    if case.family == "gpt_oss":
        # gpt-oss (configuration_gpt_oss.py): every layer an MoE layer of biased experts, q/k/v/o biases, a sink per
        # head, layers alternating sliding (window 128, here past the sequence) and full attention; no MXFP4 (the
        # weights built in the case's dtype, as Mxfp4Config(dequantize=True) loads them for training).
        config.update(num_local_experts=case.experts, num_experts_per_tok=case.top_k, attention_bias=True,
                      sliding_window=128, layer_types=[("sliding_attention", "full_attention")[i % 2]
                                                       for i in range(layers)],
                      rope_parameters={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                       "truncate": False, "original_max_position_embeddings": 4096,
                                       "rope_theta": 150000.0},
                      max_position_embeddings=131072)
    if case.family in ("deepseek_v2", "deepseek_v3"):
        # Latent attention with every head its own KV head (DeepSeek's configs), the query with a low-rank projection
        # when q_lora_rank (DeepSeek-V3's) or one q_proj (V2-Lite's), head_dim split into a non-rotary and a rotary
        # part; every layer an MoE layer.
        d = case.hidden // case.heads
        config.update(num_key_value_heads=case.heads, n_routed_experts=case.experts, num_experts_per_tok=case.top_k,
                      n_shared_experts=case.shared_experts, moe_intermediate_size=case.inner,
                      intermediate_size=FIRST_DENSE_FFN if case.first_dense else case.inner,
                      first_k_dense_replace=case.first_dense, kv_lora_rank=2 * d, q_lora_rank=case.q_lora_rank or None,
                      qk_nope_head_dim=d - d // 4,
                      qk_rope_head_dim=d // 4, v_head_dim=d, routed_scaling_factor=2.5 if case.groups else 1.0)
        config.pop("head_dim")
        if case.family == "deepseek_v2":
            config.update(topk_method="group_limited_greedy" if case.groups else "greedy", n_group=case.groups or 1,
                          topk_group=1)
        else:
            config.update(topk_method="noaux_tc", n_group=case.groups or 1, topk_group=1,
                          norm_topk_prob=case.norm_topk)
    return config


def grid_cases(base: ActivationCase, variations: dict[str, tuple], switches: bool = True) -> list[ActivationCase]:
    """The base case under every attention x dtype (x recompute x dropout when `switches`), plus one-at-a-time variations."""
    cases: list[ActivationCase] = []
    for attention in ("eager", "sdpa"):
        for dtype in DTYPES:
            recomputes = ("none", "full") if switches else ("none",)
            dropouts = (False, True) if switches else (False,)
            for recompute in recomputes:
                for dropout in dropouts:
                    if dropout and attention == "sdpa" and base.family != "gpt2":
                        continue  # no dropout left to measure: attention dropout is 0 under sdpa
                    cases.append(base.with_changes(attention=attention, dtype=dtype, recompute=recompute, dropout=dropout))
            for field_name, values in variations.items():
                for value in values:
                    cases.append(base.with_changes(attention=attention, dtype=dtype, **{field_name: value}))
    return unique_cases(cases)


def unique_cases(cases: list[ActivationCase]) -> list[ActivationCase]:
    """Drop repeated cases, keeping the first; sort by name for deterministic files."""
    by_name = {}
    for case in cases:
        by_name.setdefault(case.name, case)
    return [by_name[name] for name in sorted(by_name)]


GPT2_BASE = ActivationCase(family="gpt2", batch=2, seq_len=64, hidden=64, heads=4, vocab=256)
LLAMA_BASE = ActivationCase(family="llama", batch=2, seq_len=64, hidden=64, heads=4, kv_heads=2, ffn=176, vocab=256)


def small_activation_cases() -> list[ActivationCase]:
    """The quick CI set: both families, every switch on the base shape, a few shape changes."""
    cases = grid_cases(GPT2_BASE, {"batch": (3,), "seq_len": (96,)})
    cases += grid_cases(LLAMA_BASE, {"kv_heads": (1, 4), "vocab": (512,)})
    cases += autocast_cases(small=True)
    cases += padded_cases(small=True)
    return unique_cases(cases)


def padded_cases(small: bool = False) -> list[ActivationCase]:
    """Padded micro-batches (an attention_mask with zeros): SDPA in both dtypes and both families, with full
    recomputation, and eager attention, whose mask is there with or without padding (and, in the full set, every
    GQA ratio and autocast)."""
    cases = []
    for base in (GPT2_BASE, LLAMA_BASE):
        for dtype in DTYPES:
            cases.append(base.with_changes(attention="sdpa", dtype=dtype, padded=True))
        cases += [base.with_changes(attention="sdpa", dtype="bfloat16", recompute="full", padded=True),
                  base.with_changes(attention="eager", dtype="bfloat16", padded=True)]
    if not small:
        cases += [LLAMA_BASE.with_changes(attention="sdpa", dtype="bfloat16", kv_heads=kv, padded=True)
                  for kv in (1, 4)]
        cases += [base.with_changes(attention="sdpa", autocast=True, padded=True) for base in (GPT2_BASE, LLAMA_BASE)]
    return cases


def autocast_cases(small: bool = False) -> list[ActivationCase]:
    """torch.autocast(bfloat16) over float32 models (the amp-bf16 policy): both families, eager and SDPA,
    with recompute and dropout (and, in the full set, GQA and shape changes)."""
    cases = []
    for base in (GPT2_BASE, LLAMA_BASE):
        for attention in ("eager", "sdpa"):
            amp = base.with_changes(autocast=True, attention=attention)
            cases.append(amp)
            if not small:
                cases += [amp.with_changes(recompute="full"), amp.with_changes(batch=3, seq_len=96)]
                if attention == "eager":
                    cases.append(amp.with_changes(dropout=True))
                if base.family == "llama":
                    cases += [amp.with_changes(kv_heads=1), amp.with_changes(kv_heads=4)]
    return cases


def full_activation_cases() -> list[ActivationCase]:
    """Every measured activation case (the --write set)."""
    cases = grid_cases(GPT2_BASE, {
        "batch": (1, 3, 4), "seq_len": (32, 96, 128), "hidden": (128,), "heads": (2, 8), "vocab": (512, 1000),
    })
    cases += grid_cases(GPT2_BASE.with_changes(hidden=128, heads=8), {}, switches=False)
    cases += grid_cases(LLAMA_BASE, {
        "batch": (1, 3, 4), "seq_len": (32, 96, 128), "kv_heads": (1, 4), "heads": (8,), "vocab": (512, 1000),
        "ffn": (256,),
    })
    cases += grid_cases(LLAMA_BASE.with_changes(hidden=128, heads=8, kv_heads=2, ffn=344), {}, switches=False)
    for family in ("qwen2", "mistral", "qwen3"):
        cases += grid_cases(LLAMA_BASE.with_changes(family=family), {}, switches=False)
    # Qwen3's q/k norms (builder.model.oplists._QK_NORMS): a KV head per query head, full recomputation, autocast.
    qwen3 = LLAMA_BASE.with_changes(family="qwen3")
    cases += [qwen3.with_changes(attention="sdpa", dtype="bfloat16", kv_heads=4),
              qwen3.with_changes(attention="sdpa", dtype="bfloat16", recompute="full"),
              qwen3.with_changes(attention="sdpa", autocast=True)]
    mixtral = LLAMA_BASE.with_changes(family="mixtral", experts=4, top_k=2, ffn=96)
    cases += grid_cases(mixtral, {}, switches=False)
    cases += autocast_cases()
    cases += padded_cases()
    return unique_cases(cases)


# The dense MLP width of DeepSeek's first dense layers in the measured cases (first_dense): distinct from every other
# size, so its rows read back as their own symbol.
FIRST_DENSE_FFN = 136

# Tiny MoE layers of each transformers family (builder.model.oplists._HF_MOE): 4 experts, top 2, expert width 96.
MOE_BASE = LLAMA_BASE.with_changes(family="mixtral", experts=4, top_k=2, ffn=96)


def moe_cases() -> list[ActivationCase]:
    """transformers' MoE blocks, fp32 and bf16, SDPA (the MoE block alone, and whole layers below): Mixtral,
    Qwen2-MoE with its gated shared expert, Qwen3-MoE with and without renormalised top-k weights, DeepSeek-V2 greedy
    and group-limited, DeepSeek-V3 (grouped sigmoid routing), each with the routing switches its code reads; whole
    layers of the attention variants, gpt-oss's layers (eager attention with sinks), and DeepSeek models with a first
    dense layer."""
    cases = []
    for dtype in DTYPES:
        base = MOE_BASE.with_changes(attention="sdpa", dtype=dtype)
        deepseek = base.with_changes(kv_heads=4)  # DeepSeek's latent attention: a KV head per query head
        cases += [base, base.with_changes(family="qwen2_moe", shared_experts=2, norm_topk=False),
                  base.with_changes(family="qwen3_moe"), base.with_changes(family="qwen3_moe", norm_topk=False),
                  deepseek.with_changes(family="deepseek_v2", shared_experts=2, norm_topk=False),
                  deepseek.with_changes(family="deepseek_v2", shared_experts=2, norm_topk=False, groups=2),
                  deepseek.with_changes(family="deepseek_v3", shared_experts=1, groups=2)]
    # Shapes: more experts and tokens, a wider top-k (each symbol of the rows moves once).
    bf16 = MOE_BASE.with_changes(attention="sdpa", dtype="bfloat16")
    cases += [bf16.with_changes(family="qwen2_moe", shared_experts=1, experts=8, top_k=3, norm_topk=False, batch=3),
              bf16.with_changes(family="deepseek_v3", kv_heads=4, shared_experts=2, experts=8, top_k=3, groups=4,
                                seq_len=40)]
    # Whole layers of the attention variants (builder.model.oplists _QK_NORMS, _LATENT_ATTENTION): eager attention
    # (scores x V copies the value) and DeepSeek-V3's low-rank query (q_lora_rank). (Qwen3's q/k norms under autocast
    # are measured on the dense layer, activations.json: the MoE blocks under autocast are not modelled.)
    fp32 = MOE_BASE.with_changes(attention="sdpa")
    cases += [fp32.with_changes(family="qwen3_moe", attention="eager", dtype="bfloat16"),
              fp32.with_changes(family="deepseek_v2", kv_heads=4, shared_experts=2, norm_topk=False, attention="eager"),
              *(fp32.with_changes(family="deepseek_v3", kv_heads=4, shared_experts=1, groups=2, q_lora_rank=24,
                                  dtype=dtype) for dtype in DTYPES)]
    # gpt-oss (eager attention only: transformers' GptOss takes no SDPA): fp32 and bf16, then more experts, a wider
    # top-k, one KV head and three sequences (each symbol of its rows moves once).
    gpt_oss = MOE_BASE.with_changes(family="gpt_oss", attention="eager")
    cases += [gpt_oss, gpt_oss.with_changes(dtype="bfloat16"),
              gpt_oss.with_changes(dtype="bfloat16", experts=8, top_k=3, batch=3, kv_heads=1)]
    # DeepSeek's first dense layers (first_k_dense_replace 1, a dense MLP of FIRST_DENSE_FFN): the whole two-layer
    # model, one dense layer and one MoE layer, is compared.
    cases += [fp32.with_changes(family="deepseek_v2", kv_heads=4, shared_experts=2, norm_topk=False, first_dense=1),
              fp32.with_changes(family="deepseek_v3", kv_heads=4, shared_experts=1, groups=2, q_lora_rank=24,
                                dtype="bfloat16", first_dense=1)]
    return unique_cases(cases)


def compiled_cases() -> list[ActivationCase]:
    """Every layer under torch.compile (inductor): both families, eager and SDPA attention, fp32, bf16 and autocast,
    dropout, GQA and shape changes (each shape symbol changed once, so the rows' shapes are pinned)."""
    cases = []
    for base in (OP_LIST_BASE["gpt2"], OP_LIST_BASE["llama"]):
        for attention in ("eager", "sdpa"):
            for dtype, autocast in (("float32", False), ("bfloat16", False), ("float32", True)):
                cases.append(base.with_changes(attention=attention, dtype=dtype, autocast=autocast, dropout=False,
                                               compile=True))
            if attention == "eager" or base.family == "gpt2":
                cases.append(base.with_changes(attention=attention, dtype="bfloat16", dropout=True, compile=True))
    llama = OP_LIST_BASE["llama"].with_changes(dtype="bfloat16", dropout=False, compile=True)
    for attention in ("eager", "sdpa"):
        cases += [llama.with_changes(attention=attention, kv_heads=4), llama.with_changes(attention=attention,
                                                                                         batch=3, seq_len=20)]
    cases.append(OP_LIST_BASE["gpt2"].with_changes(dtype="bfloat16", dropout=False, compile=True, batch=3,
                                                   seq_len=20, hidden=96, heads=6))
    return unique_cases(cases)


# Representative cases whose saved tensors are listed op by op (content/validation/saved_tensors_*.json).
# Sizes are chosen so every symbol has a distinct value and shapes read back as symbols.
OP_LIST_BASE = {
    "gpt2": ActivationCase(family="gpt2", batch=5, seq_len=12, hidden=64, heads=4, vocab=211, dropout=True),
    "llama": ActivationCase(family="llama", batch=5, seq_len=12, hidden=64, heads=4, kv_heads=2, ffn=176,
                            vocab=211, dropout=True),
}


def op_list_cases() -> list[ActivationCase]:
    """One representative case per family x attention x dtype."""
    cases = []
    for family, base in OP_LIST_BASE.items():
        for attention in ("eager", "sdpa"):
            for dtype in DTYPES:
                dropout = family == "gpt2" or attention == "eager"  # Llama has only attention dropout
                cases.append(base.with_changes(attention=attention, dtype=dtype, dropout=dropout))
    return cases


def symbol_values(case: ActivationCase) -> dict[str, int]:
    """Symbol -> value for reading shapes of `case` as products of symbols."""
    return {
        "b": case.batch, "s": case.seq_len, "h": case.hidden, "a": case.heads,
        "kv": case.kv_heads or case.heads, "d": case.hidden // case.heads, "ffn": case.inner, "V": case.vocab,
    }


# Model states -------------------------------------------------------------------------

OPTIMIZERS = ("adam", "adamw", "sgd-momentum")
LORA_TARGET_MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj",
                       "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}


@dataclass(frozen=True)
class SmallModel:
    """The small random-weight model a model-state case trains one step: its family, optimizer, dtype and shape
    (StateCase on one GPU; builder/validate/sharding.py's ShardCase, one rank of FSDP2)."""

    family: str
    optimizer: str = "adamw"
    dtype: str = "float32"
    layers: int = 2
    hidden: int = 64
    heads: int = 4
    kv_heads: int | None = None
    vocab: int = 256


@dataclass(frozen=True)
class StateCase(SmallModel):
    """Parameters, gradients and optimizer states after one real optimizer step."""

    lora_rank: int = 0
    lora_targets: tuple[str, ...] = ("q", "k", "v", "o")

    @property
    def name(self) -> str:
        """Deterministic id."""
        parts = [self.family, self.optimizer, DTYPES[self.dtype], f"L{self.layers}", f"h{self.hidden}",
                 f"a{self.heads}", f"v{self.vocab}"]
        if self.lora_rank:
            targets = "all" if set(self.lora_targets) == set(LORA_TARGET_MODULES) else "".join(self.lora_targets)
            parts.append(f"lora{self.lora_rank}-{targets}")
        return "-".join(parts)

    def activation_case(self) -> ActivationCase:
        """The matching ActivationCase (for its config)."""
        return ActivationCase(family=self.family, dtype=self.dtype, hidden=self.hidden, heads=self.heads,
                              kv_heads=self.kv_heads, vocab=self.vocab, batch=2, seq_len=16)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready inputs."""
        data = asdict(self)
        data["lora_targets"] = list(self.lora_targets)
        return data


def state_cases() -> list[StateCase]:
    """Both families x optimizers x dtypes, plus LoRA on the Llama shape."""
    cases = []
    for family, kv in (("gpt2", None), ("llama", 2)):
        for optimizer in OPTIMIZERS:
            for dtype in DTYPES:
                cases.append(StateCase(family=family, optimizer=optimizer, dtype=dtype, kv_heads=kv))
    for rank, targets in ((4, ("q", "k", "v", "o")), (8, ("q", "v")), (8, tuple(LORA_TARGET_MODULES))):
        for dtype in DTYPES:
            cases.append(StateCase(family="llama", optimizer="adamw", dtype=dtype, kv_heads=2,
                                   lora_rank=rank, lora_targets=targets))
    return sorted(cases, key=lambda c: c.name)


@dataclass(frozen=True)
class PeakCase:
    """One training step measured phase by phase: a forward pass's shape plus the step around it."""

    forward: ActivationCase
    layers: int = 2
    optimizer: str = "adamw"
    grad_accum: int = 1
    lora_rank: int = 0  # > 0: every base weight frozen, LoRA adapters on q, k, v, o (as StateCase)
    # How the step runs (builder.model.config.OPTIMIZER_IMPLS): foreach, the CUDA default, unless named.
    optimizer_impl: str = "foreach"
    # 'eager' (transformers' loss), 'chunked' (torchtune's 8 chunks) or 'chunked-compiled' (each chunk's
    # compute_cross_entropy under torch.compile, as torchtune's compile_loss does; builder.validate.peak)
    loss: str = "eager"

    @property
    def name(self) -> str:
        """Deterministic id: the forward's id, then layers, optimizer, accumulation (LoRA rank, implementation)."""
        name = f"{self.forward.name}-L{self.layers}-{self.optimizer}-ga{self.grad_accum}"
        name += f"-lora{self.lora_rank}" if self.lora_rank else ""
        name += f"-{self.optimizer_impl}" if self.optimizer_impl != "foreach" else ""
        return name + (f"-{self.loss}-loss" if self.loss != "eager" else "")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready inputs (the forward's fields, flat)."""
        data = {**self.forward.as_dict(), "layers": self.layers, "optimizer": self.optimizer,
                "grad_accum": self.grad_accum}
        if self.lora_rank:
            data.update(lora_rank=self.lora_rank, lora_targets=["q", "k", "v", "o"])
        if self.optimizer_impl != "foreach":
            data["optimizer_impl"] = self.optimizer_impl
        if self.loss != "eager":
            data["loss"] = self.loss
        return data


# Wide enough vocabularies that the loss's T x V tensors matter, as they do in real models.
PEAK_LLAMA = ActivationCase(family="llama", attention="sdpa", batch=4, seq_len=256, hidden=256, heads=8, kv_heads=4,
                            ffn=688, vocab=8192)
PEAK_GPT2 = ActivationCase(family="gpt2", attention="sdpa", batch=4, seq_len=256, hidden=256, heads=8, vocab=8192)
# A small vocabulary and long sequences or wide layers: the step peaks inside a layer (builder.model.peak's
# layer_forward, layer_backward and first_layer_backward), not at the loss.
INSIDE_LLAMA = PEAK_LLAMA.with_changes(attention="eager", batch=2, seq_len=512, vocab=512)
INSIDE_GPT2 = PEAK_GPT2.with_changes(attention="eager", batch=2, seq_len=512, vocab=512)
INSIDE_MOE = dict(experts=4, top_k=2, ffn=256)  # an MoE layer for the peak shapes: 4 experts of 256, top 2


def peak_cases(small: bool = False) -> list[PeakCase]:
    """Steps whose peak falls in each phase: loss-bound (many tokens), gradient-bound (few tokens),
    optimizer-bound (Adam's temporaries), both families, fp32 and bf16, recompute, accumulation."""
    few = dict(batch=1, seq_len=16)
    cases = [
        PeakCase(PEAK_LLAMA), PeakCase(PEAK_LLAMA.with_changes(dtype="bfloat16")),
        PeakCase(PEAK_GPT2), PeakCase(PEAK_GPT2.with_changes(**few)),
        PeakCase(PEAK_LLAMA.with_changes(**few), optimizer="sgd-momentum"),
    ]
    if not small:
        cases += [
            PeakCase(PEAK_LLAMA.with_changes(recompute="full")),
            PeakCase(PEAK_LLAMA.with_changes(attention="eager")),
            PeakCase(PEAK_LLAMA.with_changes(**few)),
            PeakCase(PEAK_LLAMA.with_changes(**few), optimizer="adam"),
            PeakCase(PEAK_LLAMA.with_changes(**few), optimizer="adafactor"),
            PeakCase(PEAK_GPT2.with_changes(**few), optimizer="adafactor"),
            # How the step runs: the for-loop (Adafactor's default), fused, and the step inside backward.
            *(PeakCase(PEAK_LLAMA.with_changes(**few), optimizer=optimizer, optimizer_impl=impl)
              for optimizer, impl in (("adamw", "for-loop"), ("adamw", "fused"), ("adafactor", "for-loop"),
                                      ("adamw", "in-backward"), ("sgd-momentum", "in-backward"))),
            # torchtune's chunked loss, where the loss decides the peak: in bf16 at the start of backward, in fp32
            # (no upcast: .float() returns the logits themselves) in the output layer's backward, where two chunks'
            # weight gradients and their sum are live (builder.model.step, head_backward).
            PeakCase(PEAK_LLAMA.with_changes(dtype="bfloat16"), optimizer="sgd-momentum", loss="chunked"),
            PeakCase(PEAK_LLAMA, optimizer="sgd-momentum", loss="chunked"),
            # The same with each chunk's compute_cross_entropy under torch.compile (torchtune's compile_loss): on 4 x 256
            # tokens the backward peaks in the output layer's backward, as the eager chunks' does; on 16 x 256 (more
            # tokens than 8 x h) at the start of backward, where one chunk's compiled backward writes its bf16 gradient
            # (no fp32 gradient: builder.model.step, CHUNKED_COMPILED_LOSS).
            PeakCase(PEAK_LLAMA.with_changes(dtype="bfloat16"), optimizer="sgd-momentum", loss="chunked-compiled"),
            PeakCase(PEAK_LLAMA.with_changes(dtype="bfloat16", batch=16), optimizer="sgd-momentum",
                     loss="chunked-compiled"),
            PeakCase(PEAK_LLAMA.with_changes(dtype="bfloat16", recompute="full")),
            PeakCase(PEAK_GPT2.with_changes(dtype="bfloat16")),
            PeakCase(PEAK_GPT2.with_changes(dtype="bfloat16", **few)),
            PeakCase(PEAK_LLAMA, layers=4),
            PeakCase(PEAK_LLAMA, grad_accum=2),
            PeakCase(PEAK_GPT2, optimizer="sgd-momentum"),
            PeakCase(PEAK_LLAMA.with_changes(autocast=True)),
            PeakCase(PEAK_LLAMA, lora_rank=8), PeakCase(PEAK_LLAMA.with_changes(dtype="bfloat16"), lora_rank=8),
            PeakCase(PEAK_GPT2.with_changes(autocast=True)),
            PeakCase(INSIDE_LLAMA, optimizer="sgd-momentum"),
            PeakCase(INSIDE_LLAMA.with_changes(dtype="bfloat16"), optimizer="sgd-momentum"),
            PeakCase(INSIDE_LLAMA.with_changes(kv_heads=8, dtype="bfloat16"), optimizer="sgd-momentum"),
            PeakCase(INSIDE_LLAMA.with_changes(autocast=True), optimizer="sgd-momentum"),
            PeakCase(INSIDE_LLAMA.with_changes(recompute="full"), optimizer="sgd-momentum"),
            # Tied embeddings under full recomputation, wide enough (h above the tokens) that the embedding's backward
            # (the end of backward) comes near the first layer's: the two moments are apart, the recomputed layer
            # freed before the embedding's gradient is made (builder.model.step, RECOMPUTED_AT_END).
            PeakCase(INSIDE_GPT2.with_changes(recompute="full", attention="sdpa", batch=1, seq_len=512, hidden=1024,
                                              heads=16, vocab=8192), optimizer="sgd-momentum"),
            PeakCase(INSIDE_GPT2.with_changes(recompute="full", attention="sdpa", batch=1, seq_len=256, hidden=1024,
                                              heads=16, vocab=16384), optimizer="adamw", optimizer_impl="fused"),
            # The same shape with eager attention: the checkpointed last layer's forward peaks in the MLP's GeLU with
            # the softmax output still held by the block (builder.model.oplists, _GPT2_MLP_FORWARD).
            PeakCase(INSIDE_GPT2.with_changes(recompute="full", attention="eager", batch=1, seq_len=512, hidden=1024,
                                              heads=16, vocab=8192), optimizer="sgd-momentum"),
            PeakCase(INSIDE_GPT2, optimizer="sgd-momentum"),
            PeakCase(INSIDE_GPT2.with_changes(attention="sdpa", batch=4, seq_len=128), optimizer="sgd-momentum"),
            PeakCase(INSIDE_GPT2.with_changes(attention="sdpa", dtype="bfloat16", batch=1, seq_len=256, hidden=768,
                                              heads=12), optimizer="sgd-momentum"),
            PeakCase(INSIDE_LLAMA.with_changes(attention="sdpa", batch=4, seq_len=128, ffn=4096),
                     optimizer="sgd-momentum"),
            # RMSNorm's backward (builder.model.oplists, _rmsnorm_backward): its fp32 temporaries set the backward's
            # peak in bf16. One 64-token sequence: the first layer's input norm, after the attention's backward (the
            # rotary tables freed) and before the embedding's (its gradient not made yet: builder.model.step,
            # EMBEDDING_GRADS), with ffn equal to hidden and with the default ffn; 256 tokens, h512, ffn 256: the
            # final norm's, before the last layer's.
            *(PeakCase(PEAK_LLAMA.with_changes(dtype="bfloat16", batch=1, seq_len=64, vocab=512, **ffn),
                       optimizer="sgd-momentum") for ffn in ({"ffn": 256}, {})),
            PeakCase(PEAK_LLAMA.with_changes(dtype="bfloat16", batch=1, seq_len=256, hidden=512, ffn=256, vocab=512),
                     optimizer="sgd-momentum"),
            # In fp32 (four fp32 temporaries at a norm's pow, not five) the first layer's input norm comes just under
            # its query projection's backward, which is not a moment (named in builder.model.step).
            PeakCase(PEAK_LLAMA.with_changes(batch=1, seq_len=128, hidden=512, ffn=512, vocab=512),
                     optimizer="sgd-momentum"),
            PeakCase(PEAK_LLAMA.with_changes(batch=1, seq_len=256, hidden=768, heads=12, ffn=768, vocab=512),
                     optimizer="sgd-momentum"),
            # transformers' MoE layers (grouped_mm experts): in the last layer's backward every expert's weight
            # gradient exists (the fused 3-D parameters' gradients), and Qwen2-MoE's shared expert's and its gate's;
            # and one loss-bound step.
            PeakCase(INSIDE_LLAMA.with_changes(family="mixtral", **INSIDE_MOE), optimizer="sgd-momentum"),
            PeakCase(INSIDE_LLAMA.with_changes(family="qwen2_moe", shared_experts=2, norm_topk=False, **INSIDE_MOE),
                     optimizer="sgd-momentum"),
            PeakCase(INSIDE_LLAMA.with_changes(family="qwen2_moe", shared_experts=2, norm_topk=False, dtype="bfloat16",
                                               **INSIDE_MOE), optimizer="sgd-momentum"),
            PeakCase(PEAK_LLAMA.with_changes(family="qwen2_moe", shared_experts=2, norm_topk=False, **INSIDE_MOE)),
        ]
    return sorted(cases, key=lambda c: c.name)
