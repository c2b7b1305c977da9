"""bitsandbytes' paged optimizers: their states count in the sum of parts, the need only what must stay on the GPU.

Source: bitsandbytes 0.50.2.dev0 (commit 95f9af3) bitsandbytes/optim/optimizer.py: Optimizer8bit.get_state_buffer
pages a state (functional.py get_paged: cudaMallocManaged in csrc/pythonInterface.cpp) only for a parameter of at
least 1e5 elements; Optimizer2State.init_state keeps PagedAdamW's states in fp32 (optim_bits=32) and PagedAdamW8bit's
as uint8 codes with a plain fp32 absmax per 256; Optimizer8bit.step prefetches and updates one parameter at a time.
Dettmers et al. 2023 (QLoRA), arXiv:2305.14314, section 3: paged optimizers evict to CPU RAM when the GPU runs out.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from builder.catalog import default_models
from builder.model import Config
from builder.model.config import validate_config
from builder.model.peak import assess
from tests.page_text import page_text

LLAMA = default_models()["llama-3-8b"]
N = 8_030_261_248
EMBEDDING = 128_256 * 4096  # the largest tensor, paged at the step


def _step(config: Config) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    breakdown, needed = assess(config)
    return {p.name: p.bytes for p in breakdown.parts}, {s.name: {p.name: p.bytes for p in s.parts} for s in needed.steps}


def test_paged_adamw_states_are_fp32_in_the_sum_and_one_tensor_in_the_need():
    """Full fine-tuning of Llama 3 8B: 2 x 4 B x N in the sum; every matrix is over 1e5 elements and paged, the 65
    norm vectors of 4,096 are not; at the step the embedding's two fp32 moments are paged in."""
    parts, phases = _step(Config(model=LLAMA, optimizer="paged-adamw"))
    assert parts["optimizer/adam_m"] == parts["optimizer/adam_v"] == 4 * N
    step = phases["optimizer_step"]
    assert step["optimizer/adam_m"] == step["optimizer/adam_v"] == 4 * 65 * 4096
    assert step["optimizer/paged_in"] == 2 * 4 * EMBEDDING
    assert phases["forward"]["optimizer/adam_m"] == 4 * 65 * 4096 and "optimizer/paged_in" not in phases["forward"]


def test_paged_adamw8bit_keeps_its_absmax_on_the_gpu():
    """PagedAdamW8bit pages the uint8 codes only: the fp32 absmax per 256 elements stays a plain tensor."""
    parts, phases = _step(Config(model=LLAMA, optimizer="paged-adamw8bit"))
    part = parts["optimizer/adam_m"]
    assert part == pytest.approx(N * (1 + Fraction(4, 256)), abs=1)
    resident = phases["optimizer_step"]["optimizer/adam_m"]
    # The norms' 65 x 4,096 codes stay, and every absmax: 65 x 4,096 x 1 B + N x 4 B / 256.
    assert resident == pytest.approx(65 * 4096 + N * Fraction(4, 256), abs=2)
    assert phases["optimizer_step"]["optimizer/paged_in"] == 2 * EMBEDDING


def test_small_lora_adapters_are_not_paged():
    """LoRA r = 16 on q, k, v, o of Llama 3 8B: lora_A is 16 x 4,096 = 65,536 elements and lora_B at most
    4,096 x 16, all under 1e5, so bitsandbytes makes plain GPU tensors and the need counts every state; at r = 64 on
    all seven projections only k's and v's lora_B (1,024 x 64 = 65,536) stay plain, 32 x 2 x 65,536 elements, and
    the largest matrix, 64 x 14,336, is paged in at the step."""
    small, phases = _step(Config(model=LLAMA, optimizer="paged-adamw", lora_rank=16))
    assert phases["optimizer_step"]["optimizer/adam_m"] == small["optimizer/adam_m"]
    assert "optimizer/paged_in" not in phases["optimizer_step"]
    large, phases = _step(Config(model=LLAMA, optimizer="paged-adamw", lora_rank=64,
                                 lora_targets=("q", "k", "v", "o", "gate", "up", "down")))
    assert large["optimizer/adam_m"] == 4 * 167_772_160
    assert phases["optimizer_step"]["optimizer/adam_m"] == 4 * 32 * 2 * 65_536
    assert phases["optimizer_step"]["optimizer/paged_in"] == 2 * 4 * 64 * 14_336


def test_the_need_is_below_the_sum_of_parts():
    breakdown, needed = assess(Config(model=LLAMA, optimizer="paged-adamw"))
    assert needed.bytes < breakdown.total - 6 * N  # most of the 8 B/param of states can wait on the host


@pytest.mark.parametrize("changes, words", [
    ({"optimizer_impl": "foreach"}, "optimizer_impl: bitsandbytes' paged-adamw pages each parameter's states in"),
    ({"offload": "optimizer", "zero": 1, "dp": 8}, "offload: optimizer paged-adamw keeps its states in CUDA unified memory"),
    ({"optimizer_state_dtype": "bf16"}, "optimizer_state_dtype: paged-adamw has no state dtype to choose"),
])
def test_paged_refuses_what_bitsandbytes_does_not_run(changes, words):
    with pytest.raises(ValueError) as error:
        validate_config(Config(model=LLAMA, optimizer="paged-adamw", **changes))
    assert str(error.value).startswith(words) and "\n" not in str(error.value)


def test_paged_adamw8bit_stepped_in_backward_pages_one_parameter_in_while_backward_runs():
    """torchtune's single-device full fine-tune of Llama 3.1 8B (recipes/configs/llama3_1/8B_full_single_device.yaml:
    bitsandbytes.optim.PagedAdamW8bit with optimizer_in_bwd: True, one optimizer per parameter stepped from its
    gradient hook, torchtune/training/memory.py register_optim_in_bwd_hooks): no optimizer-step phase follows
    backward; the gradients in flight are one tensor's; backward's moments hold the largest parameter's two paged
    8-bit moments (the output layer's 128,256 x 4,096 codes, 1 B each) while it is stepped."""
    config = Config(model=default_models()["llama-3.1-8b"], precision="bf16", optimizer="paged-adamw8bit",
                    optimizer_impl="in-backward", implementation="torchtune", recompute="full", micro_batch=2,
                    seq_len=2048, loss="chunked", attention="flash")
    validate_config(config)
    parts, phases = _step(config)
    assert "optimizer_step" not in phases
    assert parts["gradients"] == 2 * EMBEDDING  # the output layer's bf16 gradient, the largest
    for moment in ("layer_backward", "first_layer_backward", "backward_end"):
        assert phases[moment]["optimizer/paged_in"] == 2 * 1 * EMBEDDING
    assert "optimizer/paged_in" not in phases["forward"]
    # The Fine-tuning page's figure is the model's need (torchtune's README lists 18.9 GiB for the run, with settings
    # it does not print: shown on the page, not pinned).
    need = assess(config)[1].bytes
    assert f"need is {need / 2**30:.2f} GiB" in page_text("fine-tuning.md")
