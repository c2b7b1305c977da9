"""How the loss is computed (--loss eager|compiled|chunked|fused-linear): the logits' and the loss's tensors at the
moments of a step, pinned to the benchmark in Cut Cross-Entropy's README (Wijmans et al. 2024, arXiv:2411.09009):
Gemma 2 2B, 8,192 tokens, a 256,000-entry vocabulary, bf16, PyTorch 2.4.1, memory in MiB (T x V x 2 B is exactly
4,000 MiB there)."""

import pytest

from builder.model import Config, estimate
from builder.model.architecture import Architecture
from builder.model.peak import phases

MiB = 2**20
# Gemma 2 2B's shape (config.json: 26 layers, hidden 2304, 8 heads of 256, 4 KV heads, intermediate 9216,
# vocabulary 256,000, tied embeddings); its logit soft-capping is not modelled.
GEMMA2_2B = Architecture(name="gemma-2-2b-shape", layers=26, hidden=2304, heads=8, kv_heads=4, head_dim=256,
                         ffn=9216, vocab=256000, tied_embeddings=True)
TOKENS = 8192


def parts_at(loss: str, phase: str) -> dict[str, int]:
    """The parts live at `phase` of a bf16 step over 8,192 tokens with loss `loss`."""
    config = Config(model=GEMMA2_2B, precision="bf16", micro_batch=1, seq_len=TOKENS, loss=loss)
    moment = next(p for p in phases(config) if p.name == phase)
    return {p.name: p.bytes for p in moment.parts}


def test_the_logits_are_4000_mib_in_bf16():
    """T x V x 2 B = 8,192 x 256,000 x 2 = 4,000 MiB: the README's torch.compile 'Loss' column (4,000.1 MB), what a
    compiled loss keeps for its backward."""
    saved = estimate(Config(model=GEMMA2_2B, precision="bf16", seq_len=TOKENS, loss="compiled")).get("activations/loss")
    # The logits, a logsumexp, the labels and the NLL loss's fp32 total weight.
    assert saved == TOKENS * 256000 * 2 + TOKENS * 4 + TOKENS * 8 + 4
    assert TOKENS * 256000 * 2 == 4000 * MiB


# The README's published columns (baseline 'Gradient' 16,000 MB, torch.compile 'Gradient' 12,000 MB and 'Loss'
# 4,000.1 MB) are cases of builder/validate/published.py, asserted in tests/test_published.py.


def test_a_compiled_loss_keeps_the_logits_and_its_gradients_take_12000_mib():
    """torch.compile fuses the upcast and the log-softmax: no fp32 copy in the forward, the logits (2 B per entry)
    kept instead of fp32 log-probabilities (4 B), and its backward's gradients an fp32 gradient of the logits and its
    bf16 cast, 6 B per entry (the README's 12,000 MB: tests/test_published.py)."""
    forward = parts_at("compiled", "forward")
    assert "activations/logits_fp32" not in forward and "activations/logits" not in forward
    assert parts_at("compiled", "backward_start")["activations/loss_grads"] == TOKENS * 256000 * 6
    eager = estimate(Config(model=GEMMA2_2B, precision="bf16", seq_len=TOKENS)).get("activations/loss")
    compiled = estimate(Config(model=GEMMA2_2B, precision="bf16", seq_len=TOKENS, loss="compiled")).get(
        "activations/loss")
    assert eager - compiled == 4000 * MiB - TOKENS * 4  # fp32 log-probs (8,000 MiB) against logits + logsumexp


def test_a_chunked_loss_upcasts_one_chunk_of_eight_at_a_time():
    """torchtune's CEWithChunkedOutputLoss (8 chunks): the logits exist whole, each chunk is upcast and its
    log-probabilities saved (as many as eager in all), and backward's loss gradients are one chunk's."""
    eager, chunked = parts_at("eager", "forward"), parts_at("chunked", "forward")
    assert chunked["activations/logits_fp32"] * 8 == eager["activations/logits_fp32"] == 8000 * MiB
    assert chunked["activations/loss"] == eager["activations/loss"]
    assert parts_at("chunked", "backward_start")["activations/loss_grads"] == 16000 * MiB // 8


def test_a_fused_linear_cross_entropy_makes_no_logits():
    """Liger Kernel's fused linear cross-entropy: one chunk of ceil(T / ceil(V / h)) = 74 rows of logits at a time;
    the lm_head input's gradient (T x h) and the weight's (V x h) are made in the forward and kept."""
    forward = parts_at("fused-linear", "forward")
    assert "activations/logits" not in forward and "activations/logits_fp32" not in forward
    assert forward["activations/loss_chunk"] == 74 * 256000 * 2
    assert "activations/loss_grads" not in parts_at("fused-linear", "backward_start")
    saved = estimate(Config(model=GEMMA2_2B, precision="bf16", seq_len=TOKENS, loss="fused-linear"))
    assert saved.get("activations/loss") == TOKENS * 2304 * 2 + 256000 * 2304 * 2 + TOKENS * 8 + 4


def test_the_loss_decides_the_need_of_a_large_vocabulary():
    """With a 256K vocabulary and 8K tokens the eager loss sets the need; a fused one removes most of it."""
    def need(loss):
        config = Config(model=GEMMA2_2B, precision="bf16", seq_len=TOKENS, loss=loss)
        return max(p.total for p in phases(config))
    assert need("eager") > need("compiled") > need("fused-linear")
    assert need("eager") - need("fused-linear") > 10000 * MiB


def test_the_reference_formula_refuses_a_loss_it_cannot_show():
    with pytest.raises(ValueError, match="^loss: the Table 2 reference formula leaves out"):
        estimate(Config(model=GEMMA2_2B, loss="compiled", activation_formula="korthikanti"))


def test_a_chunked_bf16_step_measures_as_predicted():
    """Measured on CPU (content/validation/peak.json; torchtune's chunked loss as builder/validate/peak.py runs it,
    Llama shape h256, V 8192, 4 x 256 tokens, bf16): forward peak 102,679,752 B and backward 89,563,304 B; the model
    is within 0.6% of both (the comparison of every case is tests/test_validation_report.py)."""
    from tests.test_peak import llama

    config = llama(precision="bf16", optimizer="sgd-momentum", loss="chunked")
    totals = {p.name: p.total for p in phases(config)}
    assert max(totals["forward"], totals.get("layer_forward", 0)) == pytest.approx(102679752, rel=0.006)
    assert max(v for k, v in totals.items() if "backward" in k) == pytest.approx(89563304, rel=0.006)


def test_a_chunked_fp32_step_peaks_in_the_output_layers_backward():
    """fp32, where .float() returns the logits themselves (torchtune 0.6 CEWithChunkedOutputLoss upcasts each chunk):
    autograd runs every chunk's cross-entropy backward before any output-layer backward (engine.cpp's ready queue
    takes the newer node first), so the chunks' fp32 logit gradients wait, and the output layer's weight gradients of
    the first two chunks are summed out of place (input_buffer.cpp accumulate: the first is a transposed view), three
    V x h fp32 tensors at once. Measured on CPU (content/validation/peak.json, the same Llama shape in fp32): backward
    peak 140,220,552 B, 6.0% above the start of backward; the model's output-layer moment is within 0.01%."""
    from tests.test_peak import llama

    config = llama(optimizer="sgd-momentum", loss="chunked")
    totals = {p.name: p.total for p in phases(config)}
    assert max(v for k, v in totals.items() if "backward" in k) == totals["head_backward"]
    assert totals["head_backward"] == pytest.approx(140220552, rel=0.0001)
    assert totals["backward_start"] < 140220552 * 0.95  # the start of backward alone misses it by 6%
    head = {p.name: p.bytes for p in next(p for p in phases(config) if p.name == "head_backward").parts}
    assert head["activations/loss_grads"] == 6 * (1024 // 8) * 8192 * 4  # six chunks' fp32 logit gradients
    assert head["gradients/head_sum"] == 3 * 8192 * 256 * 4
    assert "activations/loss" not in head  # the log-probabilities are freed by the loss's backward


def test_the_output_layers_backward_is_a_moment_of_the_chunked_loss_only():
    """An eager loss holds the whole T x V gradient at once and never sums chunks: no such moment."""
    from tests.test_peak import llama

    assert "head_backward" not in {p.name for p in phases(llama(loss="eager"))}
    assert "head_backward" in {p.name for p in phases(llama(precision="bf16", loss="chunked"))}


def test_a_compiled_chunked_bf16_step_measures_as_predicted():
    """torchtune's compile_loss (torchtune/training/_compile.py at 1814feb) compiles each chunk's
    compute_cross_entropy: measured on CPU (content/validation/peak.json, builder/validate/peak.py's ChunkedOutputLoss,
    PyTorch 2.13 inductor; the Llama shape h256, V 8192, bf16). On 4 x 256 tokens the backward peaks in the output
    layer's backward at 72,778,888 B, as the eager chunks' does; on 16 x 256 at the start of backward, 198,171,788 B,
    where one chunk's compiled backward writes its bf16 gradient and no fp32 one (the rule inferred before, an fp32
    gradient and its cast, 6 B per entry, gives 214.9 MB: +8.5%). The forward peaks as the last chunk's logits are
    made, with the final norm's output still live (T x h x 2 B; not a moment of the model): 1.0% and 1.2% above the
    end of the forward the model gives."""
    from tests.test_peak import llama

    def peaks(batch):
        config = llama(precision="bf16", optimizer="sgd-momentum", loss="chunked-compiled", micro_batch=batch)
        totals = {p.name: p.total for p in phases(config)}
        return totals, max(totals["forward"], totals.get("layer_forward", 0)), max(
            v for k, v in totals.items() if "backward" in k)

    totals, forward, backward = peaks(4)
    assert backward == totals["head_backward"] == pytest.approx(72778888, rel=0.0001)
    assert forward == pytest.approx(65055520, rel=0.011)
    totals, forward, backward = peaks(16)
    assert backward == totals["backward_start"] == pytest.approx(198171788, rel=0.0001)
    assert forward == pytest.approx(192043904, rel=0.013)
    start = {p.name: p.bytes for p in next(p for p in phases(llama(
        precision="bf16", loss="chunked-compiled", micro_batch=16)) if p.name == "backward_start").parts}
    assert start["activations/loss_grads"] == 16 * 256 * (8192 * 2 + 4) // 8  # one chunk's bf16 gradient and a sum
