"""QLoRA's dequantised weight as rules: the compute-dtype copy bitsandbytes makes of a 4-bit linear weight.

Read from bitsandbytes 0.50.2.dev0 (commit 95f9af3):
- nn/modules.py Linear4bit.forward: the input cast to compute_dtype, then bnb.matmul_4bit(x, self.weight, ...);
- autograd/_functions.py matmul_4bit and MatMul4Bit.forward: the packed weight goes to
  torch.ops.bitsandbytes.gemm_4bit (with the 8-bit absmax, its code and offset when double quantised);
  MatMul4Bit.backward, for the input's gradient: torch.matmul(grad_output, F.dequantize_4bit(B, ctx.state)
  .to(grad_output.dtype)), so a whole dequantised copy of the weight (N x K in the dtype it was quantised from:
  the compute dtype in a bf16 run, where .to() makes no second copy);
- functional.py dequantize_4bit: double quantised (quant_state.nested), absmax = dequantize_blockwise(...), an fp32
  tensor of one value per block of 64 (N x K / 64), with the offset added in place, freed when it returns;
- backends/cuda/ops.py, the gemm_4bit kernel: past _gemm_4bit_custom_max_m = 1536 rows (tokens) and below it where
  _gemm_4bit_use_custom_cuda prefers it (per GPU architecture; never at 4 rows or fewer,
  _GEMM_4BIT_CUSTOM_FLOOR_M), _dequant_linear_fallback: double quantised, absmax_dq (fp32, N x K / 64) and
  absmax_dq + absmax_offset (another), then B_dq = torch.empty(shapeB, dtype=A.dtype) (N x K in the compute dtype)
  and F.linear: all three live at the matmul.

So around each frozen projection, in the forward and again in the backward, one weight exists whole in the compute
dtype. The largest one sets the moment: counted inside a layer's forward and backward moments
(builder.model.step), beside that moment's own temporaries.

torchtune's QLoRA (implementation torchtune) quantises with torchao instead, read at v0.5.0 (commit ae8384b,
September 2024, the torchao of torchtune's README tables; NF4Tensor.get_original_weight is the same from v0.4.0 to
torchao's main, torchao/quantization/quantize_/workflows/nf4/nf4_tensor.py):
- torchao/dtypes/nf4tensor.py LinearNF4.forward: ctx.save_for_backward(weight), then F.linear(input,
  weight.to(input.dtype)); LinearNF4.backward: grad_output @ weight.to(grad_output.dtype). NF4Tensor's
  Tensor.to(dtype) (function_to_dtype) is get_original_weight().to(dtype), in the forward and again in the backward,
  at every token count (no fused kernel);
- NF4Tensor.get_original_weight, in eager code: the packed codes' two halves as int64 ((quantized_data >> 4)
  .to(torch.long) and (quantized_data & 0b1111).to(torch.long): N x K / 2 x 8 B each), both halves looked up in the
  nf4 table (dequantize: nf4[value], in the dtype the weight was quantised from), both scaled by the block scalers
  (dequantize_scalers: N x K / 64 of them in that dtype), then torch.stack of the two into the N x K copy: all of these
  locals live at the stack, 8 + 3 x bytes(compute dtype) + bytes(compute dtype) / 64 bytes per weight (14.03 in bf16;
  measured on CPU with the function copied: tests/test_lora_torchtune.py). The repeated scalers' flattened copies
  (N x K / 2 each) are freed before it.
A compiled layer has no moments of its own (builder.model.peak.unmodelled names its instants): there inductor fuses
these steps into one kernel that writes the copy and nothing else (read from its generated code for the same function
copied, torch 2.13 on CPU; torchao is not installed here, so its tensor subclass was not traced), not counted.
"""

from __future__ import annotations

from fractions import Fraction

from builder.model.adapters import TORCHTUNE
from builder.model.cite import Cite
from builder.model.expr import Expr, best, both, either, eq, fmt, ne, sym, when, within
from builder.model.partrules import bytes_of
from builder.model.placement import TP_SHARE

COMMIT = "bitsandbytes-95f9af3"  # bitsandbytes 0.50.2.dev0 (commit 95f9af3), a key of content/references.toml
BNB_SOURCE = (Cite(COMMIT, "bitsandbytes/autograd/_functions.py:384 MatMul4Bit.backward")
              + ": F.dequantize_4bit(B, ctx.state).to(grad_output.dtype); "
              + Cite(COMMIT, "bitsandbytes/backends/cuda/ops.py:904-926 gemm_4bit's _dequant_linear_fallback")
              + ": absmax_dq, absmax_dq + absmax_offset, B_dq = torch.empty(shapeB, dtype=A.dtype), the fused kernel "
              "up to _GEMM_4BIT_CUSTOM_FLOOR_M = 4 rows and always dequantised past _gemm_4bit_custom_max_m = 1536; "
              + Cite(COMMIT, "bitsandbytes/functional.py:1053 dequantize_4bit") + ": nested, an fp32 absmax")

# Rows (tokens) up to which the CUDA gemm_4bit always runs its fused kernel (_GEMM_4BIT_CUSTOM_FLOOR_M), and past
# which it always dequantises (_gemm_4bit_custom_max_m).
FUSED_ROWS = 4
ALWAYS_DEQUANTISED_ROWS = 1536
BLOCK = 64  # quantize_4bit's blocksize, one absmax per block
ABSMAX_BYTES = Fraction(4, BLOCK)  # an fp32 absmax per block of 64 weights, per weight

# One weight matrix of a block on this GPU (biases and norms are not quantised matrices): split over the
# tensor-parallel ranks as builder.model.placement has it, an expert's matrix over tp alone (expert parallelism
# places whole experts, as builder.model.optimizers' largest tensor has it).
_MATRIX = sym("dim0") * sym("rest") / when(eq(sym("group"), "mlp/experts"), sym("tp"), TP_SHARE)
_QUANTISED = both(sym("in_block"), ne(sym("group"), "norms"), sym("rest") > 1)
_CANDIDATE = when(_QUANTISED, _MATRIX, 0)
DOUBLE = sym("qlora_double_quant")
TORCHAO = TORCHTUNE  # torchtune's NF4 weights are torchao's NF4Tensor
TORCHAO_SOURCE = (Cite("torchao-nf4", "torchao/dtypes/nf4tensor.py LinearNF4.forward and backward")
                  + ": weight.to(input.dtype) and weight.to(grad_output.dtype); "
                  + Cite("torchao-nf4", "NF4Tensor.get_original_weight")
                  + ": int64 codes in two halves, their nf4 lookups, scaled, then torch.stack (measured on CPU)")
SOURCE = when(TORCHAO, TORCHAO_SOURCE, BNB_SOURCE)
SYMBOLS: dict[str, Expr] = {
    # The largest quantised weight on this GPU, in elements (Mistral 7B and Llama 3 8B: the MLP's 14336 x 4096; none
    # without an architecture).
    "dequant_largest": when(sym("has_architecture"), within(best(sym("parameter_tensors"), _CANDIDATE), _CANDIDATE), 0),
    # The forward dequantises unless bitsandbytes' fused kernel takes the matmul (at most 4 tokens); torchao's
    # LinearNF4 always does.
    "dequant_forward": both(sym("qlora"), eq(sym("mode"), "train"), either(sym("op_T") > FUSED_ROWS, TORCHAO)),
    "dequant_backward": both(sym("qlora"), eq(sym("mode"), "train")),
}
# The copy in the compute dtype (the policy's activation dtype, also where a prepared model saves fp32 activations),
# and with double quantisation the fp32 absmax made from the 8-bit one: two of them in the forward's fallback
# (absmax_dq and absmax_dq + offset), one in the backward.
COMPUTE_BYTES = bytes_of(sym("activation_dtype"))
# torchao's get_original_weight at its torch.stack, per weight: two int64 halves (8 B), the looked-up halves, the
# scaled halves and the stacked copy (3 x bytes), and the block scalers (bytes / 64).
TORCHAO_BYTES = 8 + 3 * COMPUTE_BYTES + COMPUTE_BYTES / BLOCK
SYMBOLS["dequant_forward_bytes"] = sym("dequant_largest") * when(TORCHAO, TORCHAO_BYTES,
                                                                 COMPUTE_BYTES + when(DOUBLE, 2 * ABSMAX_BYTES, 0))
SYMBOLS["dequant_backward_bytes"] = sym("dequant_largest") * when(TORCHAO, TORCHAO_BYTES,
                                                                  COMPUTE_BYTES + when(DOUBLE, ABSMAX_BYTES, 0))
FORWARD, BACKWARD = sym("dequant_forward_bytes"), sym("dequant_backward_bytes")
TORCHAO_FORMULA = "N_largest x (8 B + 3 x bytes(compute dtype) + bytes(compute dtype) / 64)"
PLAIN_FORMULA = "N_largest x bytes(compute dtype)"
FORWARD_FORMULA = when(TORCHAO, TORCHAO_FORMULA,
                       when(DOUBLE, "N_largest x (bytes(compute dtype) + 2 x 4 B / 64)", PLAIN_FORMULA))
BACKWARD_FORMULA = when(TORCHAO, TORCHAO_FORMULA,
                        when(DOUBLE, "N_largest x (bytes(compute dtype) + 4 B / 64)", PLAIN_FORMULA))
PER_UNIT = when(TORCHAO,
                fmt("torchao's eager dequantisation of the largest quantised weight (int64 codes, {0} halves and the "
                    "{0} copy)", sym("activation_dtype")),
                fmt("one {0} copy of the largest quantised weight", sym("activation_dtype")))
TORCHAO_NOTE = ("simplification: counted with the layer's worst moment, whichever op that is (the copies live only "
                "inside their own projection's dequantisation)")
_BNB_FORWARD_NOTE = ("simplification: counted with the layer's worst moment, whichever op that is (the copy lives "
                     f"only around its own projection); from {FUSED_ROWS + 1} to {ALWAYS_DEQUANTISED_ROWS:,} tokens "
                     "per micro-batch bitsandbytes picks its fused kernel, which makes no copy, on some GPUs (by "
                     "architecture and shape); counted anyway")
_BNB_BACKWARD_NOTE = ("simplification: counted with the layer's worst moment, whichever op that is (the copy lives "
                      "only around its own projection); a weight quantised from another dtype than the compute dtype "
                      "is converted by a second copy, left out")
FORWARD_NOTE = when(TORCHAO, TORCHAO_NOTE, _BNB_FORWARD_NOTE)
BACKWARD_NOTE = when(TORCHAO, TORCHAO_NOTE, _BNB_BACKWARD_NOTE)
