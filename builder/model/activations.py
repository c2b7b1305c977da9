"""Activation memory: what each operation saves for backward, op by op.

Two ways to count, chosen by Config.activation_formula:

* 'ops' (default): a list of the tensors each operation of one transformer block saves
  for its backward pass, with shape and dtype, summed. The list follows a named
  implementation (Config.implementation):
  - 'megatron': the GPT block as analysed by Korthikanti et al. 2022 (arXiv:2205.05198),
    section 4.1 (16-bit activations, 1-byte dropout masks, LayerNorm statistics
    neglected as the paper does). With a GeLU 4h MLP and dropout its sum is exactly
    sbh(34 + 5as/h) (Table 2), which tests check.
  - 'hf': Hugging Face transformers 5.23 modeling code under PyTorch 2.13 autograd,
    measured by `python -m builder validate` (content/validation/).
* 'korthikanti': the closed-form Table 2 formulas themselves, as a reference mode
  (layers only: the paper's Table 2 leaves out embeddings, logits and loss).

Symbols: s sequence length, b micro-batch size, h hidden size, a attention heads,
k key/value heads, d head dim, f MLP inner size, V vocabulary, t tensor-parallel size,
L layers. "Elements" are per micro-batch on one GPU, before dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from builder.model.architecture import Architecture
from builder.model.config import Config
from builder.model.units import dtype_bytes

KORTHIKANTI = "Korthikanti et al. 2022, arXiv:2205.05198, Table 2"
FLASH = "Dao et al. 2022 (FlashAttention), arXiv:2205.14135, Algorithm 2: saves output and logsumexp"
HF_CODE = "transformers 5.23 modeling code, PyTorch 2.13 autograd (measured: content/validation/)"


@dataclass(frozen=True)
class Saved:
    """One tensor an operation saves for backward."""

    group: str  # part of the layer: 'norms', 'attention', 'attention_scores', 'mlp', 'dropout', 'router'
    op: str  # which operation saves it, in words
    elements: int  # number of elements on this GPU for one micro-batch
    dtype: str  # 'act' (the activation dtype) or a concrete dtype ('fp32', 'bool', 'int64')
    core: bool = False  # inside core attention: dropped by selective recompute

    def bytes(self, activation_dtype: str) -> Fraction:
        """Bytes of this tensor given the activation dtype."""
        dtype = activation_dtype if self.dtype == "act" else self.dtype
        size = Fraction(8) if dtype == "int64" else dtype_bytes(dtype)
        return self.elements * size


@dataclass(frozen=True)
class LocalShape:
    """Sizes one GPU sees for one micro-batch, after tensor, sequence and context parallelism."""

    b: int  # micro-batch
    s: int  # query tokens per sequence on this GPU (s / cp)
    s_kv: int  # keys each query attends over (full sequence)
    h: int  # hidden
    a: int  # query heads on this GPU (a / t)
    k: int  # key/value heads on this GPU (max(1, k / t))
    d: int  # head dim
    f: int  # MLP inner width on this GPU (f / t)
    vocab: int  # vocabulary rows on this GPU (V / t, vocab-parallel)
    t_sp: int  # divisor for 'replicated' regions: t under sequence parallelism, else 1
    experts_local: int = 0  # experts on this GPU
    top_k: int = 0
    experts: int = 0

    @property
    def tokens(self) -> int:
        """Tokens of this micro-batch on this GPU (b * s)."""
        return self.b * self.s

    @property
    def tokens_rep(self) -> Fraction:
        """Tokens in regions TP replicates (norms, dropouts, layer inputs); divided by t under SP."""
        return Fraction(self.b * self.s, self.t_sp)


def local_shape(arch: Architecture, config: Config, seq_len: int, micro_batch: int) -> LocalShape:
    """Per-GPU sizes for a micro-batch of `micro_batch` sequences of `seq_len` tokens."""
    t = config.tp
    return LocalShape(
        b=micro_batch,
        s=seq_len // config.cp,
        s_kv=seq_len,
        h=arch.hidden,
        a=arch.heads // t,
        k=max(1, arch.n_kv_heads // t),
        d=arch.d_head,
        f=(arch.ffn or arch.n_expert_ffn) // t if not arch.is_moe else arch.n_expert_ffn // t,
        vocab=-(-arch.vocab // t),
        t_sp=t if config.sequence_parallel else 1,
        experts_local=arch.experts // config.ep if arch.is_moe else 0,
        top_k=arch.top_k,
        experts=arch.experts,
    )


# ---------------------------------------------------------------------------------------
# Megatron GPT block (Korthikanti et al. 2022, section 4.1)
# ---------------------------------------------------------------------------------------

def megatron_layer(arch: Architecture, x: LocalShape, config: Config) -> list[Saved]:
    """Tensors a Megatron GPT block saves, in the paper's accounting (section 4.1)."""
    T, Tr = x.tokens, x.tokens_rep
    q_elems, kv_elems = T * x.a * x.d, T * x.k * x.d
    scores = x.b * x.a * x.s * x.s_kv
    dropout = config.dropout
    saved = [
        Saved("norms", "LayerNorm 1 input", Tr * x.h, "act"),
        Saved("attention", "QKV projection input", Tr * x.h, "act"),
        Saved("attention", "Q and K for QK^T", q_elems + kv_elems, "act"),
        Saved("attention", "V for attention over values", kv_elems, "act"),
        Saved("attention", "output projection input", q_elems, "act"),
    ]
    saved += _core_attention(x, config, scores, dropout, fp32_softmax=False)
    if dropout:
        saved.append(Saved("dropout", "attention output dropout mask", Tr * x.h, "bool"))
    saved += [
        Saved("norms", "LayerNorm 2 input", Tr * x.h, "act"),
        Saved("mlp", "first MLP linear input", Tr * x.h, "act"),
    ]
    saved += _mlp_inner(arch, x, T, style="fused")
    if dropout:
        saved.append(Saved("dropout", "MLP output dropout mask", Tr * x.h, "bool"))
    return saved


def _core_attention(x: LocalShape, config: Config, scores: int, dropout: bool, fp32_softmax: bool) -> list[Saved]:
    """Core attention (softmax(QK^T)V) internals: the s x s matrices, or flash's logsumexp."""
    if config.attention in ("sdpa", "flash"):
        # No s x s matrix: the kernel saves its output (already saved by the output projection)
        # and the logsumexp per head and row, in fp32 (Dao et al. 2022, Algorithm 2).
        return [Saved("attention", "flash logsumexp (fp32, per head and row)", x.b * x.a * x.s, "fp32", core=True)]
    saved = [Saved("attention_scores", "softmax output", scores, "fp32" if fp32_softmax else "act", core=True)]
    if fp32_softmax:
        saved.append(Saved("attention_scores", "softmax output cast back to the activation dtype", scores, "act", core=True))
    if dropout:
        saved.append(Saved("attention_scores", "attention dropout mask", scores, "bool", core=True))
        saved.append(Saved("attention_scores", "attention dropout output (input of scores x V)", scores, "act", core=True))
    return saved


def _mlp_inner(arch: Architecture, x: LocalShape, tokens: int, style: str) -> list[Saved]:
    """The activation function and second linear of a dense MLP (inner width f)."""
    inner = tokens * x.f
    if arch.mlp == "swiglu":
        # act(gate) * up: SiLU saves its input (gate output); the product saves both factors;
        # the down projection saves the product (transformers LlamaMLP).
        return [
            Saved("mlp", "SiLU input (gate projection output)", inner, "act"),
            Saved("mlp", "SiLU output (factor of the product)", inner, "act"),
            Saved("mlp", "up projection output (factor of the product)", inner, "act"),
            Saved("mlp", "down projection input", inner, "act"),
        ]
    if style == "python_tanh":
        # transformers NewGELUActivation: 0.5*x*(1+tanh(c*(x+0.044715*x**3))) in Python
        # ops: pow saves x, tanh saves its output, the final product saves 0.5*x and 1+tanh.
        return [
            Saved("mlp", "GeLU: pow input (x)", inner, "act"),
            Saved("mlp", "GeLU: tanh output", inner, "act"),
            Saved("mlp", "GeLU: 0.5*x factor", inner, "act"),
            Saved("mlp", "GeLU: 1+tanh factor", inner, "act"),
            Saved("mlp", "second MLP linear input", inner, "act"),
        ]
    return [
        Saved("mlp", "GeLU input", inner, "act"),
        Saved("mlp", "second MLP linear input", inner, "act"),
    ]


# ---------------------------------------------------------------------------------------
# Hugging Face transformers (5.23) under PyTorch autograd
# ---------------------------------------------------------------------------------------

def hf_gpt2_layer(arch: Architecture, x: LocalShape, config: Config) -> list[Saved]:
    """Tensors a transformers GPT2Block saves (LayerNorm, Conv1D, eager or SDPA attention)."""
    T, Tr = x.tokens, x.tokens_rep
    q_elems, kv_elems = T * x.a * x.d, T * x.k * x.d
    scores = x.b * x.a * x.s * x.s_kv
    dropout = config.dropout
    style = "python_tanh" if arch.activation == "gelu_tanh_python" else "fused"
    saved = [
        *_layernorm(Tr, x.h, "LayerNorm 1"),
        Saved("attention", "c_attn input", Tr * x.h, "act"),
        *_attention_qkv(x, config, q_elems, kv_elems),
        *_core_attention(x, config, scores, dropout, fp32_softmax=False),
        Saved("attention", "c_proj input (merged heads)", q_elems, "act"),
    ]
    if dropout:
        saved.append(Saved("dropout", "residual dropout mask (attention)", Tr * x.h, "bool"))
    saved += [*_layernorm(Tr, x.h, "LayerNorm 2"), Saved("mlp", "c_fc input", Tr * x.h, "act")]
    saved += _mlp_inner(arch, x, T, style)
    if dropout:
        saved.append(Saved("dropout", "residual dropout mask (MLP)", Tr * x.h, "bool"))
    return saved


def hf_llama_layer(arch: Architecture, x: LocalShape, config: Config) -> list[Saved]:
    """Tensors a transformers Llama/Mistral/Qwen2/Mixtral decoder layer saves."""
    T, Tr = x.tokens, x.tokens_rep
    q_elems, kv_elems = T * x.a * x.d, T * x.k * x.d
    scores = x.b * x.a * x.s * x.s_kv
    saved = [
        *_rmsnorm(Tr, x.h, "input RMSNorm", config),
        Saved("attention", "q/k/v projection input (RMSNorm output)", Tr * x.h, "act"),
        *_attention_qkv(x, config, q_elems, kv_elems),
        *_core_attention(x, config, scores, config.dropout, fp32_softmax=True),
        Saved("attention", "o_proj input (merged heads)", q_elems, "act"),
        *_rmsnorm(Tr, x.h, "post-attention RMSNorm", config),
        Saved("mlp", "gate/up projection input (RMSNorm output)", Tr * x.h, "act"),
    ]
    if arch.is_moe:
        saved += _moe(arch, x, T)
    else:
        saved += _mlp_inner(arch, x, T, "fused")
    return saved


def _layernorm(tokens: Fraction, h: int, name: str) -> list[Saved]:
    """torch.nn.LayerNorm saves its input and fp32 mean and reciprocal std per token."""
    return [
        Saved("norms", f"{name} input", tokens * h, "act"),
        Saved("norms", f"{name} mean and rstd (fp32)", 2 * tokens, "fp32"),
    ]


def _rmsnorm(tokens: Fraction, h: int, name: str, config: Config) -> list[Saved]:
    """transformers LlamaRMSNorm in Python ops: fp32 input copy, rsqrt, normalised input."""
    saved = [
        Saved("norms", f"{name}: fp32 input (pow and mul)", tokens * h, "fp32"),
        Saved("norms", f"{name}: rsqrt of mean square (fp32)", tokens, "fp32"),
    ]
    if config.policy.activation != "fp32":
        # x.to(input_dtype) is a new tensor that weight * x saves; in fp32 it is the same tensor
        # as the fp32 product above... which is itself a new tensor, saved by weight * x.
        saved.append(Saved("norms", f"{name}: normalised input cast to activation dtype", tokens * h, "act"))
    else:
        saved.append(Saved("norms", f"{name}: normalised input (x * rsqrt)", tokens * h, "fp32"))
    return saved


def _attention_qkv(x: LocalShape, config: Config, q_elems: int, kv_elems: int) -> list[Saved]:
    """Q, K and V as the attention kernel saves them (GQA heads repeated by eager code)."""
    if config.attention == "eager" and x.k != x.a:
        # repeat_kv materialises K and V with all a heads before the matmuls.
        return [Saved("attention", "Q, and K and V repeated to all heads (repeat_kv)", q_elems * 3, "act")]
    return [Saved("attention", "Q, K and V as saved by the attention kernel", q_elems + 2 * kv_elems, "act")]


def _moe(arch: Architecture, x: LocalShape, tokens: int) -> list[Saved]:
    """Mixtral-style sparse MLP: router softmax and top-k, then each routed token's expert MLP."""
    routed = tokens * x.top_k
    inner = routed * x.f
    return [
        Saved("router", "router logits softmax output (fp32)", tokens * x.experts, "fp32"),
        Saved("router", "top-k routing weights and indices", routed, "fp32"),
        Saved("router", "top-k expert indices (int64)", routed, "int64"),
        Saved("mlp", "expert inputs gathered per routed token", routed * x.h, "act"),
        Saved("mlp", "SiLU input (gate projection output)", inner, "act"),
        Saved("mlp", "SiLU output (factor of the product)", inner, "act"),
        Saved("mlp", "up projection output (factor of the product)", inner, "act"),
        Saved("mlp", "down projection input", inner, "act"),
        Saved("mlp", "expert outputs before routing-weight scaling", routed * x.h, "act"),
    ]


# ---------------------------------------------------------------------------------------
# Non-layer parts: embeddings, final norm, logits, loss
# ---------------------------------------------------------------------------------------

def non_layer_first_stage(arch: Architecture, x: LocalShape, config: Config) -> dict[str, list[Saved]]:
    """Embedding-side saved tensors (first pipeline stage)."""
    T = x.tokens
    saved = [Saved("embedding", "token ids for the embedding backward (int64)", T, "int64")]
    if arch.positions == "learned":
        saved.append(Saved("embedding", "position ids (int64)", x.s, "int64"))
    if config.dropout:
        saved.append(Saved("embedding", "embedding dropout mask", x.tokens_rep * x.h, "bool"))
    return {"embedding": saved}


def non_layer_last_stage(arch: Architecture, x: LocalShape, config: Config) -> dict[str, list[Saved]]:
    """Final norm, logits and loss (last pipeline stage)."""
    T, Tr = x.tokens, x.tokens_rep
    if config.implementation == "hf" and arch.norm == "rmsnorm":
        final = _rmsnorm(Tr, x.h, "final RMSNorm", config)
    else:
        final = _layernorm(Tr, x.h, "final LayerNorm")
    final = [Saved("final_norm", s.op, s.elements, s.dtype) for s in final]
    final.append(Saved("final_norm", "lm_head input (final norm output)", Tr * x.h, "act"))
    # Cross-entropy in fp32 (transformers ForCausalLMLoss upcasts logits.float()): log_softmax
    # saves its fp32 output of T x V; nll_loss saves the int64 targets.
    loss = [
        Saved("loss", "log_softmax output (fp32 logits upcast)", T * x.vocab, "fp32"),
        Saved("loss", "shifted labels (int64)", T, "int64"),
    ]
    return {"final_norm": final, "loss": loss}


LAYER_FUNCTIONS = {
    ("megatron", "any"): megatron_layer,
    ("hf", "gpt2"): hf_gpt2_layer,
    ("hf", "llama"): hf_llama_layer,
}


def layer_saved(arch: Architecture, config: Config, x: LocalShape) -> list[Saved]:
    """The op list of one block for the configured implementation."""
    if config.implementation == "megatron":
        return megatron_layer(arch, x, config)
    if arch.family == "gpt2" or arch.norm == "layernorm":
        return hf_gpt2_layer(arch, x, config)
    return hf_llama_layer(arch, x, config)


def apply_recompute(saved: list[Saved], config: Config, x: LocalShape) -> list[Saved]:
    """Selective recompute drops core attention; full recompute keeps only the layer input."""
    if config.recompute == "selective":
        return [s for s in saved if not s.core]
    if config.recompute == "full":
        # Checkpointing keeps the block's input (Chen et al. 2016; Korthikanti et al. 2022 section 4.1: 2sbh).
        return [Saved("checkpoint", "layer input kept by activation checkpointing", x.tokens_rep * x.h, "act")]
    return saved


def saved_bytes(saved: list[Saved], activation_dtype: str) -> Fraction:
    """Total bytes of a list of saved tensors."""
    return sum((s.bytes(activation_dtype) for s in saved), Fraction(0))


# ---------------------------------------------------------------------------------------
# Korthikanti et al. 2022, Table 2: the reference formulas (bytes per layer)
# ---------------------------------------------------------------------------------------

def korthikanti_per_layer(s: int, b: int, h: int, a: int, t: int = 1, sequence_parallel: bool = False,
                          recompute: str = "none") -> Fraction:
    """Activation bytes per transformer layer, Table 2 of Korthikanti et al. 2022.

    no parallelism: sbh(34 + 5as/h); tensor parallel: sbh(10 + 24/t + 5as/(ht));
    tensor + sequence parallel: sbh(34/t + 5as/(ht)); selective recompute drops the
    5as/h term; full recompute keeps 2sbh (the layer input; /t under SP).
    """
    sbh = Fraction(s * b * h)
    attention = Fraction(5 * a * s, h * t)
    if recompute == "full":
        return 2 * sbh / (t if sequence_parallel else 1)
    if recompute == "selective":
        attention = Fraction(0)
    if t == 1:
        return sbh * (34 + attention)
    if sequence_parallel:
        return sbh * (Fraction(34, t) + attention)
    return sbh * (10 + Fraction(24, t) + attention)
