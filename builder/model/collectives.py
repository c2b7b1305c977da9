"""Memory outside PyTorch that an engine's collectives take, by interconnect: the rule vLLM's non-torch memory and
SGLang's torch.distributed set-up both read (builder.model.engines, builder.model.engine_sglang), written once.

On a GPU of an NVLink switch board, tensor parallelism costs about 1.85 GiB a rank outside PyTorch, the step vLLM's
logs show between one GPU and two or more (NCCL's communicator buffers and the engines' custom all-reduce buffers);
on other boards, PCIe ones among them, it stays small. Each figure is an assumption, named with its logs.
"""

from __future__ import annotations

from fractions import Fraction

from builder.model.cite import Cite
from builder.model.expr import both, sym
from builder.model.units import GiB as GIB

# vLLM's non-torch memory on one GPU, from published vLLM start-up logs.
NON_TORCH = GIB // 4
NON_TORCH_SOURCE = ("assumed 0.25 GiB: published vLLM logs show 0.07 GiB (v0.10.2, one H100) to 0.31 GiB (Sep 2026, "
                    "one 48 GB GPU) of non-torch memory (cuBLAS and attention workspaces, NCCL and all-reduce buffers)")
# With tensor parallelism over an NVLink switch, non-torch memory grows by about 1.8 GiB a rank, the same in vLLM
# versions a year apart (NCCL's and the custom all-reduce's buffers, allocated outside PyTorch); PCIe boards without
# it stay near the single-GPU figure (0.25 GiB on two RTX 4090s, vLLM issue #13061; 0.20 GiB on RTX 3090s, vLLM PR
# #14447).
NON_TORCH_TP = Fraction(21, 10) * GIB
NON_TORCH_TP_SOURCE = ("assumed 2.1 GiB at tensor parallel size 2 and more on a GPU of an NVLink switch board (HGX "
                       "H100, H200, B200): " + Cite("llmd-planner-d3121e0", "vLLM 0.19.0 logs, 'non-torch memory'")
                       + " show 2.06 to 2.21 GiB a rank at sizes 2 and 4 against 0.24 to 0.27 GiB at size 1; "
                       + Cite("vllm-pr-10511", "Meta-Llama-3-8B at -tp 2") + " shows the same 1.8 GiB step")
# What tensor parallelism over the switch adds a rank: the step between the two figures above (1.85 GiB).
SWITCH_STEP = NON_TORCH_TP - NON_TORCH
SWITCH_STEP_SOURCE = ("assumed 1.85 GiB, the step vLLM's logs show from one GPU to tensor parallelism over an NVLink "
                      "switch (2.1 - 0.25 GiB of non-torch memory: " + Cite("llmd-planner-d3121e0",
                                                                           "vLLM 0.19.0 logs, 'non-torch memory'")
                      + ")")
# The GPUs of NVLink switch boards (Hopper and Blackwell HGX), by catalog id; other GPUs, PCIe boards among them,
# keep the single-GPU figures at any tensor parallel size.
NVLINK_SWITCH_GPUS = ("h100-80gb", "h200", "b200")
TP_OVER_SWITCH = both(sym("tp") > 1, sym("nvlink_switch"))
