"""torchao's float8 training (Float8Linear) as torchtitan and torchtune run it, as data: what each recipe saves,
casts for an instant and gathers.

torchtitan's `--model.converters float8` (Float8LinearConverter) and torchtune's `enable_fp8_training` swap the
model's nn.Linear layers for torchao's Float8Linear. Read in torchao 0.19.0.dev (commit 36027d8, torchao/float8/):

- What a converted linear layer saves for backward: float8_linear.py matmul_with_hp_or_float8_args.forward calls
  `ctx.save_for_backward(input_hp, weight_hp_t)` before anything is cast: the high-precision (bf16) input and the
  weight itself, as nn.Linear saves them, for every recipe. The float8 copies are made and freed inside the forward
  and made again in the backward; no float8 tensor lives from one to the other. So the saved activations are the
  bf16 run's, byte for byte (measured on CPU with the same torchao source: tests/test_float8.py).
- What a cast costs for an instant: float8_scaling_utils.py hp_tensor_to_float8_dynamic takes the amax
  (float8_utils.py tensor_to_amax: torch.abs, then max; a bf16 copy freed at once), then float8_training_tensor.py
  _ToFloat8ConstrFunc.forward makes `tensor.to(torch.float32) * scale` (an fp32 copy, then the scaled fp32 product)
  and float8_utils.py to_fp8_saturated clamps it (another fp32 tensor) and casts it (the 1-byte result), the scaled
  copy still held by the caller: 9 bytes per element of the bf16 tensor at that instant, 1 byte kept.
- Layout copies: float8_ops.py preprocess_addmm makes the first operand row-major (`a_data.contiguous()`) and the
  second column-major (`b_data.t().contiguous().t()`): in the backward the weight for the input gradient, and both
  operands of the weight gradient (the output gradient transposed, the saved input), are copied, 1 byte an element.
- Row-wise scales: addmm_float8_unwrapped runs a row-wise matmul without fast accumulation (the input and weight
  gradients' GemmConfigs, use_fast_accum False) as a tensor-wise one and multiplies its bf16 output in place by
  `a_inverse_scale * b_inverse_scale`, an fp32 tensor of the output's shape.
- The recipes (config.py Float8LinearConfig.from_recipe_name): tensorwise (one scale a tensor, e4m3, e5m2 for
  gradients), rowwise (a scale a row, every gemm in float8) and rowwise_with_gw_hp (a scale a row, the weight for the
  input gradient tensor-wise, the weight gradient's matmul in bf16: its operands are not cast).
- FSDP2 all-gather in float8 (config.py enable_fsdp_float8_all_gather, tensorwise only: `__post_init__` asserts it):
  fsdp_utils.py WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather casts each local shard to float8 and returns
  its data and its scale; fsdp_post_all_gather wraps the gathered data as a Float8TrainingTensor: the gathered
  weight is 1 byte a parameter instead of 2, with one fp32 scale a weight beside it, and neither the forward nor the
  backward casts it again (float8_linear.py: `tensor_already_casted_to_fp8(weight_hp_t)`).

Which layers: torchtitan converts every Linear whose in and out features divide by 16 and whose name is not in
filter_fqns (torchtitan/components/quantization/utils.py module_filter_fn at b5bcd76; the output layer too unless
filter_fqns names it, "output", or "lm_head" at b5bcd76); torchtune's convert_to_float8_training skips the output
layer (`fqn != "output"`), as torchtitan's December 2024 Float8Handler did. The rules that price all this are in
builder.model.states (the gathered weights), builder.model.oplists (the instants inside a layer, generated from
INSTANTS) and builder.model.step (the output layer's instants); this module holds the instants and their words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from builder.model.cite import Cite
from builder.model.expr import Expr, both, eq, isin, lift, maximum, mod, ne, negate, sym, when

TORCHAO = "torchao-float8-36027d8"  # torchao 0.19.0.dev (commit 36027d8), torchao/float8/
TORCHTITAN = "torchtitan-float8-b5bcd76"  # Float8LinearConverter at b5bcd76: rowwise recipes, filter_fqns
TORCHTITAN_TENSORWISE = "torchtitan-float8-1ea5d51"  # the converter before 6348d93: tensorwise, fp8 all-gather
TORCHTUNE = "torchtune-float8-bd2a0fc"  # torchtune/training/quantization.py convert_to_float8_training

RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")

SAVED = (Cite(TORCHAO, "torchao/float8/float8_linear.py matmul_with_hp_or_float8_args.forward")
         + ": ctx.save_for_backward(input_hp, weight_hp_t), the bf16 input and the weight, for every recipe")
CASTS = (Cite(TORCHAO, "torchao/float8/float8_linear.py matmul_with_hp_or_float8_args") + " (the casts of each gemm's "
         "operands), " + Cite(TORCHAO, "float8_training_tensor.py _ToFloat8ConstrFunc.forward") + " (tensor.to("
         "torch.float32) * scale), " + Cite(TORCHAO, "float8_utils.py to_fp8_saturated") + " (clamp, then the float8 "
         "cast: 9 bytes an element at that instant), " + Cite(TORCHAO, "float8_ops.py preprocess_addmm") + " (the "
         "operands' layout copies) and " + Cite(TORCHAO, "float8_ops.py addmm_float8_unwrapped") + " (row-wise scales "
         "multiplied in as an fp32 tensor of the output's shape)")
GATHERED = (Cite(TORCHAO, "torchao/float8/fsdp_utils.py WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather and "
                          "fsdp_post_all_gather")
            + " (each shard cast to float8 before the all-gather, the gathered weight a Float8TrainingTensor, an fp32 "
            "scale a weight); " + Cite(TORCHTITAN_TENSORWISE, "docs/float8.md") + " (enable_fsdp_float8_all_gather)")
CONVERTED = (Cite(TORCHTITAN, "torchtitan/components/quantization/utils.py module_filter_fn") + " (every Linear whose "
             "dimensions divide by 16 and whose name filter_fqns does not name, the output layer included)")

# The run's float8 settings as the rules read them (builder.model.inputs): torchao's recipe ('' for none), FSDP's
# float8 all-gather, and whether the output layer is filtered out (torchtitan's filter_fqns "output").
FLOAT8 = both(eq(sym("mode"), "train"), ne(sym("float8"), ""))
ALL_GATHER = both(FLOAT8, sym("enable_fsdp_float8_all_gather"))
# The output layer converted: torchtitan's default, unless filter_fqns names it or a dimension does not divide by 16.
HEAD = both(FLOAT8, negate(sym("float8_filter_output")), eq(mod(sym("vocab"), 16), 0),
            eq(mod(sym("hidden"), 16), 0))

# The op lists' conditions the instants use (builder.model.oplists.CONDITIONS has their words), as rules.
CONDITIONS: dict[str, Expr] = {
    "float8": FLOAT8,
    # Without the float8 all-gather every forward and backward casts the bf16 weight itself.
    "float8_weight_cast": both(FLOAT8, negate(ALL_GATHER)),
    # Row-wise scales on the input gradient's gemm (rowwise; rowwise_with_gw_hp's output gradient is row-wise).
    "float8_rowwise_input_grad": isin(sym("float8"), "rowwise", "rowwise_with_gw_hp"),
    # The weight gradient's gemm in float8 (its operands cast again), with row-wise scales under rowwise.
    "float8_weight_grad": isin(sym("float8"), "tensorwise", "rowwise"),
    "float8_rowwise_weight_grad": eq(sym("float8"), "rowwise"),
    # rowwise_with_gw_hp: the weight gradient's matmul in bf16 (cast_config_*_for_grad_weight DISABLED).
    "float8_weight_grad_hp": eq(sym("float8"), "rowwise_with_gw_hp"),
}


@dataclass(frozen=True)
class Term:
    """A tensor live at an instant of a converted linear layer: `coefficient` x the elements of `operand` ('in': the
    layer's input, M x K; 'out': its output, M x N; 'w': its weight, K x N) in `dtype` ('fp32', 'fp8', 'act': the
    activation dtype, 'grad': the gradient dtype), where `condition` (a CONDITIONS name, '' always) holds."""

    coefficient: int
    operand: str
    dtype: str
    what: str
    condition: str = ""


@dataclass(frozen=True)
class Instant:
    """One instant of a converted linear layer's forward or backward: the tensors live then beyond the layer's saved
    input, its weight and (in the backward) the gradient of its output."""

    phase: str  # 'forward' or 'backward'
    op: str
    condition: str  # a CONDITIONS name ('' always)
    terms: tuple[Term, ...]


def _cast(operand: str, name: str) -> tuple[Term, Term]:
    """A bf16 tensor cast to float8, at the instant the 1-byte result is made: the fp32 scaled copy and its clamped
    copy, and the result."""
    return (Term(2, operand, "fp32", f"{name} upcast and scaled, then clamped (fp32)"),
            Term(1, operand, "fp8", f"{name} in float8"))


_WEIGHT_F8 = Term(1, "w", "fp8", "the weight in float8", "float8_weight_cast")
_GO_F8 = Term(1, "out", "fp8", "the output gradient in float8")
_INPUT_GRAD = Term(1, "in", "act", "the input gradient")

# matmul_with_hp_or_float8_args, in the order its forward and backward run (torchao commit 36027d8).
INSTANTS: tuple[Instant, ...] = (
    Instant("forward", "forward: the input cast to float8", "", _cast("in", "the input")),
    Instant("forward", "forward: the weight cast to float8", "float8_weight_cast",
            (Term(1, "in", "fp8", "the input in float8"), *_cast("w", "the weight"))),
    Instant("forward", "forward: the float8 matmul", "",
            (Term(1, "in", "fp8", "the input in float8"), _WEIGHT_F8, Term(1, "out", "act", "the output"))),
    Instant("backward", "backward: the output gradient cast to float8", "", _cast("out", "the output gradient")),
    Instant("backward", "backward: the weight cast to float8 for the input gradient", "float8_weight_cast",
            (_GO_F8, *_cast("w", "the weight"))),
    Instant("backward", "backward: the input gradient's float8 matmul", "",
            (_GO_F8, _WEIGHT_F8, Term(1, "w", "fp8", "the weight's column-major copy"), _INPUT_GRAD,
             Term(1, "in", "fp32", "the row-wise scales' product", "float8_rowwise_input_grad"))),
    Instant("backward", "backward: the output gradient cast again for the weight gradient", "float8_weight_grad",
            (_GO_F8, _WEIGHT_F8, _INPUT_GRAD, *_cast("out", "the output gradient"))),
    Instant("backward", "backward: the saved input cast to float8 for the weight gradient", "float8_weight_grad",
            (Term(2, "out", "fp8", "the output gradient in float8, twice"), _WEIGHT_F8, _INPUT_GRAD,
             *_cast("in", "the saved input"))),
    Instant("backward", "backward: the weight gradient's float8 matmul", "float8_weight_grad",
            (Term(2, "out", "fp8", "the output gradient in float8, twice"), _WEIGHT_F8, _INPUT_GRAD,
             Term(1, "in", "fp8", "the saved input in float8"),
             Term(1, "out", "fp8", "the output gradient's row-major copy (transposed)"),
             Term(1, "in", "fp8", "the saved input's column-major copy"),
             Term(1, "w", "grad", "the weight gradient"),
             Term(1, "w", "fp32", "the row-wise scales' product", "float8_rowwise_weight_grad"))),
    Instant("backward", "backward: the weight gradient's bf16 matmul", "float8_weight_grad_hp",
            (_GO_F8, _WEIGHT_F8, _INPUT_GRAD, Term(1, "w", "grad", "the weight gradient"))),
)
assert {t.condition for i in INSTANTS for t in i.terms} | {i.condition for i in INSTANTS} <= set(CONDITIONS) | {""}


def instant_bytes(instant: Instant, size: dict[str, Any], dtype: Callable[[str], Any],
                  holds: Callable[[str], Any]) -> Expr:
    """One instant's bytes as a rule: each term's coefficient x its operand's elements (`size`) x its dtype's bytes
    (`dtype`), where its condition holds (`holds` turns a condition name into a rule); 0 where the instant's own
    condition does not hold."""
    total: Any = 0
    for term in instant.terms:
        amount = term.coefficient * size[term.operand] * dtype(term.dtype)
        total = total + (when(holds(term.condition), amount, 0) if term.condition else amount)
    return when(holds(instant.condition), total, 0) if instant.condition else lift(total)


def largest(phase: str, size: dict[str, Any], dtype: Callable[[str], Any], holds: Callable[[str], Any]) -> Expr:
    """The largest of a linear layer's instants of `phase` ('forward' or 'backward') as a rule."""
    return maximum(*(instant_bytes(i, size, dtype, holds) for i in INSTANTS if i.phase == phase))
