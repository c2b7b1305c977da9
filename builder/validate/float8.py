"""torchao's float8 training measured on CPU: one Float8Linear's forward and backward, and whole transformers Llama
training steps with every linear layer converted, as builder.model.float8 prices them (tests/test_float8.py pins
what this printed).

torchao is not a dependency of this project and is not installed: its float8 training is pure Python
(torchao/float8/), so this runs it from a source tree put on the path, e.g. `git archive` of pytorch/ao at 36027d8,
the commit builder.model.float8 cites:

    python -m builder.validate.float8 --torchao /path/to/ao

Two things a GPU does otherwise are made here as a GPU does them: torch._scaled_mm allocates its output only (the CPU
kernel's dequantised fp32 copies of its operands are not the GPU's), and the row-wise recipes' in-place product of a
bf16 output by the fp32 scales is taken a row at a time (ATen's TensorIterator compute_types makes fp32 temporaries
of a mixed-dtype in-place product on CPU only; a CUDA kernel casts as it reads).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any, Iterator

from builder.validate.cases import INSIDE_LLAMA, PEAK_LLAMA, PeakCase

RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")
# One linear layer (tokens M, in features K, out features N) for each instant to be the largest somewhere.
LINEAR_SHAPES = ((256, 128, 512), (1024, 128, 256), (64, 512, 512), (512, 1024, 128))
# Whole steps (bf16, SGD with momentum): the output layer's backward the peak (4 x 256 tokens, vocabulary 8192), a
# layer's backward and forward (2 x 512 tokens, vocabulary 512), full recomputation.
STEPS = (PeakCase(PEAK_LLAMA.with_changes(dtype="bfloat16"), optimizer="sgd-momentum"),
         PeakCase(INSIDE_LLAMA.with_changes(dtype="bfloat16", attention="sdpa"), optimizer="sgd-momentum"),
         PeakCase(PEAK_LLAMA.with_changes(dtype="bfloat16", recompute="full"), optimizer="sgd-momentum"))


def load(source: str) -> Any:
    """torchao.float8 from the source tree `source` (transformers' Llama imported first: it asks an installed torchao
    for its version, which a source tree has none of), with the GPU's allocations (module docstring)."""
    import torch
    import transformers.models.llama.modeling_llama  # noqa: F401

    os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")
    sys.path.insert(0, source)
    import torchao.float8 as float8
    import torchao.float8.float8_ops as ops

    def scaled_mm(a, b, scale_a=None, scale_b=None, bias=None, scale_result=None, out_dtype=None,
                  use_fast_accum=False):
        return torch.empty(a.shape[0], b.shape[1], dtype=out_dtype)

    torch._scaled_mm = scaled_mm
    unwrapped = ops.addmm_float8_unwrapped

    def addmm(*args, **kwargs):
        with _rows_at_a_time():
            return unwrapped(*args, **kwargs)

    ops.addmm_float8_unwrapped = addmm
    return float8


@contextlib.contextmanager
def _rows_at_a_time() -> Iterator[None]:
    """A bf16 tensor's in-place product by an fp32 matrix, a row at a time."""
    import torch

    whole = torch.Tensor.__imul__

    def imul(self, other):
        if isinstance(other, torch.Tensor) and other.dtype != self.dtype and other.dim() == 2:
            for row in range(self.shape[0]):
                whole(self[row], other[row])
            return self
        return whole(self, other)

    torch.Tensor.__imul__ = imul
    try:
        yield
    finally:
        torch.Tensor.__imul__ = whole


def measure_linear(float8: Any, recipe: str, m: int, k: int, n: int, all_gather: bool = False) -> dict[str, int]:
    """Peak bytes one Float8Linear adds in its forward (above its input and weight) and in its backward (above its
    saved input, its weight, its output and the output's gradient). `all_gather`: its weight already float8, as
    FSDP2's fsdp_post_all_gather hands it over with enable_fsdp_float8_all_gather."""
    import torch
    from torchao.float8.float8_linear import matmul_with_hp_or_float8_args
    from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
    from torchao.float8.float8_training_tensor import GemmInputRole

    from builder.validate.peak import CpuMeter

    model = torch.nn.Sequential(torch.nn.Linear(k, n, bias=False)).to(torch.bfloat16)
    float8.convert_to_float8_training(model, config=float8.Float8LinearConfig.from_recipe_name(recipe))
    layer = model[0]
    x = torch.randn(m, k, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(m, n, dtype=torch.bfloat16)
    weight = None
    if all_gather:
        with torch.no_grad():
            weight = hp_tensor_to_float8_dynamic(layer.weight.detach(), layer.config.cast_config_weight.target_dtype,
                                                 layer.linear_mm_config, gemm_input_role=GemmInputRole.WEIGHT)
        weight.requires_grad_(True)

    def forward():
        if weight is None:
            return layer(x)
        return matmul_with_hp_or_float8_args.apply(x, weight.t(), layer.linear_mm_config, layer.config)

    forward().backward(grad)  # once unmeasured
    with CpuMeter() as meter:
        with meter.phase("forward", True):
            y = forward()
        with meter.phase("backward", True):
            y.backward(grad)
    output = y.numel() * y.element_size()
    return {"forward": meter.peaks["forward"], "backward": meter.peaks["backward"] - output}


def measure_step(float8: Any, case: PeakCase, recipe: str, filter_output: bool) -> dict[str, Any]:
    """A whole training step of `case` with every linear layer converted (the output layer too unless
    `filter_output`), measured by builder.validate.peak."""
    from builder.validate.peak import measure_peak_case

    config = float8.Float8LinearConfig.from_recipe_name(recipe)

    def convert(model):
        float8.convert_to_float8_training(model, config=config, module_filter_fn=(
            (lambda module, fqn: fqn != "lm_head") if filter_output else None))

    result = measure_peak_case(case, convert=convert)
    return {"name": case.name, "recipe": recipe, "filter_output": filter_output,
            **{key: result["measured"][key] for key in ("peak_forward", "peak_backward")}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torchao", required=True, help="a pytorch/ao source tree (the directory holding torchao/)")
    args = parser.parse_args(argv)
    float8 = load(args.torchao)
    linears = [{"recipe": recipe, "shape": shape, "all_gather": gather,
                **measure_linear(float8, recipe, *shape, all_gather=gather)}
               for shape in LINEAR_SHAPES for recipe in RECIPES
               for gather in ((False, True) if recipe == "tensorwise" else (False,))]
    steps = [measure_step(float8, case, recipe, filter_output)
             for case in STEPS for recipe, filter_output in (("tensorwise", False), ("rowwise", False),
                                                             ("rowwise_with_gw_hp", False), ("tensorwise", True))]
    print(json.dumps({"linears": linears, "steps": steps}, indent=1))


if __name__ == "__main__":
    main()
