"""The one table of symbols: every letter the site's formulas use, what it means and its unit.

The parts' formulas (PartRule.formula, in words and letters such as 'N x bytes(param dtype)'), the
estimate's `Breakdown.where` and the pages' LaTeX all use these names; the Notation page is this table,
and each display formula links its symbols to their rows. A symbol's `name` is its letter with its
subscript ('N_d', 'd_in'); a name ending in '_*' stands for the letter with any subscript ('M_*': the
memory of whatever the subscript names).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Symbol:
    """One symbol: how formulas write it, what it means, its unit."""

    name: str  # letter + '_' + subscript, e.g. 'N_d', 'Psi', 'M_*'
    meaning: str
    unit: str
    group: str  # which table of the Notation page it belongs to

    @property
    def letter(self) -> str:
        """The base letter as text ('Ψ' for Psi)."""
        base = self.name.split("_", 1)[0]
        return GREEK_LETTERS.get(base, base)

    @property
    def subscript(self) -> str:
        """The subscript as text ('' when there is none; 'x' for a family such as M_*)."""
        _, _, sub = self.name.partition("_")
        return "x" if sub == "*" else sub


GREEK_LETTERS = {"Psi": "Ψ"}
SHAPE, RUN, PARALLEL, STATES, SERVING, RESULT = ("Model shape", "Batch and sequence", "Parallelism",
                                                 "Model states and fine-tuning", "Serving engines", "Results")

SYMBOLS: dict[str, Symbol] = {symbol.name: symbol for symbol in (
    Symbol("Psi", "parameters of the whole model (ZeRO's notation)", "parameters", STATES),
    Symbol("Psi_frozen", "parameters of the frozen base model under LoRA", "parameters",
           STATES),
    Symbol("N", "parameters this GPU holds the states of (after sharding)", "parameters", STATES),
    Symbol("N_gpu", "parameters stored on this GPU (after tensor, pipeline and expert "
           "parallelism)", "parameters", STATES),
    Symbol("N_adapter", "trainable parameters of one LoRA adapter", "parameters", STATES),
    Symbol("N_adapters", "trainable LoRA adapter parameters", "parameters", STATES),
    Symbol("N_linear", "parameters in quantised linear layers", "parameters", SERVING),
    Symbol("N_other", "parameters left in 16 bits (embeddings, norms)", "parameters", SERVING),
    Symbol("N_largest", "parameters of the largest quantised weight matrix on this GPU (QLoRA)", "parameters",
           STATES),
    Symbol("n_scales", "fp32 scales per block of 64 weights that QLoRA's double quantisation rebuilds at once",
           "count", STATES),
    Symbol("K", "optimizer bytes per parameter, master copy included (ZeRO's K: 12 for mixed-precision Adam)",
           "bytes per parameter", STATES),
    Symbol("m", "Adam's first moment (running mean of the gradient)", "one value per parameter", STATES),
    Symbol("v", "Adam's second moment (running mean of the squared gradient)", "one value per parameter",
           STATES),
    # Hu et al. 2021, eq. 3: h = W0 x + B A x with W0 of d x k, B of d x r, A of r x k (k: input width, d: output).
    Symbol("W", "a frozen weight matrix that LoRA adapts, d_out x d_in", "matrix", STATES),
    Symbol("A", "LoRA's down-projection, r x d_in: it takes the layer's input", "matrix", STATES),
    Symbol("B", "LoRA's up-projection, d_out x r: it gives the layer's output", "matrix", STATES),
    Symbol("r", "LoRA rank", "count", STATES),
    Symbol("d_in", "input width of a weight matrix (under LoRA, of the adapted one)", "elements", STATES),
    Symbol("d_out", "output width of a weight matrix (under LoRA, of the adapted one)", "elements", STATES),
    Symbol("P_os", "ZeRO stage 1: optimizer states partitioned", "(a stage, not a number)", PARALLEL),
    Symbol("P_os+g", "ZeRO stage 2: optimizer states and gradients partitioned",
           "(a stage, not a number)", PARALLEL),
    Symbol("P_os+g+p", "ZeRO stage 3: optimizer states, gradients and parameters partitioned",
           "(a stage, not a number)", PARALLEL),
    Symbol("L", "transformer layers", "layers", SHAPE),
    Symbol("L_stage", "layers on this pipeline stage", "layers", PARALLEL),
    Symbol("h", "hidden size (model width)", "elements", SHAPE),
    Symbol("a", "attention heads", "heads", SHAPE),
    Symbol("k", "key/value heads (a for multi-head attention, fewer with grouped-query attention)", "heads",
           SHAPE),
    Symbol("d", "head dimension (h / a for most models)", "elements", SHAPE),
    Symbol("d_c", "latent attention's compressed key/value width (kv_lora_rank)", "elements", SHAPE),
    Symbol("d_r", "latent attention's rotary key width, shared by all heads (qk_rope_head_dim)", "elements", SHAPE),
    Symbol("d_nope", "latent attention's per-head key width without the rotary part (qk_nope_head_dim)", "elements",
           SHAPE),
    Symbol("d_v", "latent attention's per-head value width (v_head_dim)", "elements", SHAPE),
    Symbol("w", "sliding-window size: the tokens a sliding layer attends to", "tokens", SHAPE),
    Symbol("L_full", "layers attending to the whole context", "layers", SHAPE),
    Symbol("L_sliding", "sliding-window layers", "layers", SHAPE),
    Symbol("f", "MLP intermediate size", "elements", SHAPE),
    Symbol("V", "vocabulary size", "tokens", SHAPE),
    Symbol("E", "experts per mixture-of-experts layer", "experts", SHAPE),
    Symbol("k_top", "experts each token is routed to", "experts", SHAPE),
    Symbol("b", "micro-batch size (sequences per GPU per forward pass)", "sequences", RUN),
    Symbol("s", "sequence length", "tokens", RUN),
    Symbol("N_d", "data-parallel GPUs (ZeRO's notation)", "GPUs", PARALLEL),
    Symbol("t", "tensor-parallel size", "GPUs", PARALLEL),
    Symbol("p", "pipeline-parallel size (stages)", "GPUs", PARALLEL),
    Symbol("n_chunks", "layer chunks per GPU under an interleaved pipeline schedule", "count",
           PARALLEL),
    Symbol("c", "context-parallel size", "GPUs", PARALLEL),
    Symbol("e", "expert-parallel size", "GPUs", PARALLEL),
    Symbol("c_cap", "mixture-of-experts capacity factor: the most tokens an expert takes, as a multiple of its even "
           "share", "multiple", PARALLEL),
    Symbol("u", "vLLM's --gpu-memory-utilization", "fraction of the GPU", SERVING),
    Symbol("f_mem", "SGLang's --mem-fraction-static", "fraction of free memory", SERVING),
    Symbol("n_full", "full CUDA graphs vLLM captures: its capture sizes up to --max-num-seqs", "graphs", SERVING),
    Symbol("n_new", "tokens Hugging Face generate adds after the prompt (max_new_tokens)", "tokens", SERVING),
    Symbol("s_cache", "tokens each layer of a static cache allocates (max_cache_len)", "tokens", SERVING),
    Symbol("r_keep", "rows of logits the prefill makes (logits_to_keep)", "rows", SERVING),
    Symbol("M_*", "memory of what the subscript names (M_KV: the KV cache, M_layer: one layer's "
           "activations, ...)", "bytes", RESULT),
    Symbol("M", "memory of the quantity the formula defines", "bytes", RESULT),
)}


def lookup(name: str) -> Symbol | None:
    """The registry's symbol for a name a formula writes: itself, else its letter's family ('M_KV' -> 'M_*')."""
    if name in SYMBOLS:
        return SYMBOLS[name]
    letter, _, subscript = name.partition("_")
    return SYMBOLS.get(f"{letter}_*") if subscript else None
