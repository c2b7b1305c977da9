"""Low-precision training recipes (Transformer Engine's fp8 and fp4) as data: what each one keeps.

An fp8 or fp4 recipe does not make a weight cost 1 or 0.5 bytes. Transformer Engine (TE) runs each linear
layer's GEMMs in the low-precision format but keeps the parameters in their higher precision: it quantises
the weight on the fly into a *workspace*, a second copy (TransformerEngine 2.20.0.dev0, commit d0067d0,
transformer_engine/pytorch/module/linear.py `_Linear` forward: quantize_weight(..., workspace=...)), which
Megatron-LM caches between micro-batches and steps (megatron/core/extensions/transformer_engine.py, commit
d98e8a6: TELinear passes is_first_microbatch unless disable_parameter_transpose_cache; TE keeps it in
`self._fp8_workspaces["weight"]`). The copy holds both usages the GEMMs need: row-wise for the forward
(fprop) and column-wise for the input gradient (dgrad), because the weight quantiser is set
`set_usage(rowwise=True, columnwise=...)` whenever the input requires grad. What a linear layer saves for
backward is its *quantised input*, column-wise only ("Discard row-wise data since it is not needed in
backward pass", linear.py), not the 16-bit input.

Sizes per element, from each quantised tensor's inner buffers (`inner_tensor_specs` in
transformer_engine/pytorch/tensor/float8_tensor.py, mxfp8_tensor.py, nvfp4_tensor.py, same commit):
- per-tensor fp8 (DelayedScaling, Float8CurrentScaling): `_data` (1 B) and, on GPUs without non-TN fp8
  GEMMs (Hopper), a separate `_transpose` (1 B) for the column-wise usage; one fp32 `_scale_inv` per tensor;
- MXFP8 (MXFP8BlockScaling, Blackwell): row-wise and column-wise data (1 B each), each with an E8M0 scale per
  32 elements (1 B; the scale tensor is padded to multiples of [128, 4]);
- NVFP4 (NVFP4BlockScaling, Blackwell): row-wise and column-wise E2M1 data (two values per byte), each with an
  E4M3 scale per 16 elements (1 B) and one fp32 amax per tensor.

With `quantized_model_init` (formerly fp8_model_init; Megatron-LM's --fp8-param-gather) the modules "hold only
quantized copies of its parameters, as opposed to the default behavior where both higher precision and
quantized copies are present" (transformer_engine/pytorch/quantization.py); the fp32 master copy lives in
the optimizer. The rules that price these are in builder.model.states (weights) and
builder.model.activations (the saved inputs); this module holds the numbers and their words.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from builder.model.cite import Cite
from builder.model.expr import Expr, both, eq, lift, ne, sym, when

TE = "te-d0067d0"  # TransformerEngine 2.20.0.dev0 (commit d0067d0), a key of content/references.toml
MEGATRON = "megatron-d98e8a6"  # Megatron-LM (commit d98e8a6)
TE_LINEAR = (Cite(TE, "transformer_engine/pytorch/module/linear.py _Linear forward") + " (the weight quantised into a "
             "workspace with row-wise and column-wise usage, cached in _fp8_workspaces when is_first_microbatch is "
             "given; " + Cite(MEGATRON, "megatron/core/extensions/transformer_engine.py TELinear") + " passes it)")
TE_SAVED_INPUT = (Cite(TE, "transformer_engine/pytorch/module/linear.py _Linear forward") + " (saves the quantised "
                  "input, column-wise only, for the weight gradient)")
TE_PARAMS = (Cite(TE, "transformer_engine/pytorch/quantization.py quantized_model_init") + " (modules hold only "
             "quantised copies of their parameters); " + Cite(MEGATRON, "--fp8-param-gather"))


@dataclass(frozen=True)
class Recipe:
    """One recipe: the bytes per element of a linear layer's quantised weight and saved input, and its words."""

    name: str  # the `recipe` input's value (a precision policy's recipe)
    title: str  # the recipe as TE and Megatron-LM name it
    weight: Fraction  # bytes per weight element of the quantised copy (row-wise + column-wise, with scales)
    weight_words: str
    saved_input: Fraction  # bytes per element of the quantised input a linear layer saves (column-wise)
    input_words: str
    # Megatron-LM has the attention output projection save its original 16-bit input (the attention kernel's own
    # saved output) instead of a quantised copy: every recipe but delayed scaling (attention.py, commit d98e8a6).
    projection_saves_original: bool
    source: str  # the tensor layout's file, cited as Cite(TE, file)
    left_out: str  # what the sizes leave out for this recipe


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("te-fp8", "fp8 with per-tensor scaling (TE DelayedScaling, Megatron-LM's default --fp8-recipe delayed)",
           Fraction(2), "fp8 data + fp8 transpose", Fraction(1), "fp8 transpose",
           False, Cite(TE, "transformer_engine/pytorch/tensor/float8_tensor.py") + " (_data and, without non-TN fp8 GEMMs, "
                  f"_transpose: 1 B each; one fp32 _scale_inv per tensor)",
           "counted as on Hopper (data + transpose): on Blackwell, whose fp8 GEMMs take either layout, one 1 B buffer "
           "serves both usages; the per-tensor scales and amax histories (a few bytes per layer) are left out"),
    Recipe("te-mxfp8", "MXFP8 (TE MXFP8BlockScaling, Megatron-LM --fp8-recipe mxfp8)",
           2 * (1 + Fraction(1, 32)), "row-wise + column-wise fp8, an E8M0 scale per 32 each",
           1 + Fraction(1, 32), "column-wise fp8 + E8M0 scale per 32",
           True, Cite(TE, "transformer_engine/pytorch/tensor/mxfp8_tensor.py") + " (row-wise and column-wise data, 1 B each, "
                 f"with a 1 B scale per 32 elements each)",
           "the scale tensors' padding (to multiples of 128 x 4) is left out"),
    Recipe("te-nvfp4", "NVFP4 (TE NVFP4BlockScaling, Megatron-LM --fp4-format e2m1 --fp4-recipe nvfp4)",
           2 * (Fraction(1, 2) + Fraction(1, 16)), "row-wise + column-wise fp4, an E4M3 scale per 16 each",
           Fraction(1, 2) + Fraction(1, 16), "column-wise fp4 + E4M3 scale per 16",
           True, Cite(TE, "transformer_engine/pytorch/tensor/nvfp4_tensor.py") + " (row-wise and column-wise E2M1 data, two "
                 f"values per byte, with a 1 B E4M3 scale per 16 elements each and an fp32 amax per tensor)",
           "the per-tensor fp32 amax and the scale tensors' padding are left out; the NVFP4 recipe's optional 16-bit "
           "first and last layers (Megatron-LM --first-last-layers-bf16, off by default) are not modelled"),
)}

# What the recipes leave at higher precision: the words the parts carry beside each recipe's left_out.
KEPT_HIGH = ("only the transformer blocks' linear-layer weights get a quantised copy: embeddings, norms, biases, "
             "the MoE router and the output layer stay 16-bit (Megatron-LM's defaults: fp8_output_proj off)")


def by_recipe(field: str, otherwise: Any = 0) -> Expr:
    """A rule: the `field` of the run's recipe (the `recipe` input), `otherwise` for none."""
    rule = lift(otherwise)
    for recipe in reversed(tuple(RECIPES.values())):
        value = getattr(recipe, field)
        rule = when(eq(sym("recipe"), recipe.name), int(value) if isinstance(value, bool) else value, rule)
    return rule


def recipe_on() -> Expr:
    """A rule: a recipe applies (training with a recipe named)."""
    return both(eq(sym("mode"), "train"), ne(sym("recipe"), ""))
