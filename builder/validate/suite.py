"""Run every measurement of a set (small or full) and return the result documents by file name."""

from __future__ import annotations

from typing import Any, Callable

from builder.validate.cases import (DTYPES, compiled_cases, full_activation_cases, moe_cases, op_list_cases,
                                    peak_cases, small_activation_cases, state_cases)
from builder.validate.results import document, environment

ACTIVATIONS_DESCRIPTION = (
    "Bytes autograd saves for backward in one training forward pass with loss (labels = input_ids), "
    "Hugging Face transformers models with random weights on CPU, counted by storage (each storage once, "
    "whole nbytes), parameters excluded, buffers and the caller's input_ids reported apart. per_layer = "
    "(2 layers) - (1 layer); rest = (1 layer) - per_layer. Dropout follows the CUDA path (native_dropout, "
    "1-byte mask); sdpa cases run with attention-probability dropout 0 (CPU SDPA has dropout only in its "
    "math fallback). recompute 'full' = transformers non-reentrant checkpointing of every layer; counted: "
    "what stays saved outside the layers plus the inputs each checkpoint holds."
)
STATES_DESCRIPTION = (
    "Parameter, gradient and optimizer-state bytes after one real optimizer step on CPU (torch.optim), "
    "each storage once. Adam's per-tensor 'step' counters are reported apart (optimizer_step_bytes). LoRA: "
    "minimal implementation (builder/validate/states.py), every base weight frozen."
)
LARGE_DESCRIPTION = (
    "The activation measurement under torch FakeTensorMode for real layer shapes (nothing allocated), "
    "b=1, s=4096, bf16."
)
SHARDING_DESCRIPTION = (
    "FSDP2 fully_shard (every block, then the root) with a fake process group on CPU; one process plays one "
    "rank; local shard bytes (storages of to_local(), each once) after one AdamW step."
)

PEAK_DESCRIPTION = (
    "Peak live bytes in each phase (forward, backward, optimizer step) of the second of two real training steps: "
    "zero_grad(set_to_none=True), a forward keeping only the loss, loss.backward(), optimizer.step() with torch's "
    "foreach implementation (the CUDA default). On CPU: the allocator's every allocation and free from "
    "torch.profiler memory events, summed in time order from before the model is built (absolute live bytes). "
    "Everything live counts: parameters, optimizer states and step counters, buffers, inputs, temporaries."
)

PEAK_GPU_DESCRIPTION = (
    "The peak cases on a CUDA GPU: torch.cuda.max_memory_allocated and max_memory_reserved per phase "
    "(reset_peak_memory_stats before each phase) of the second of two training steps, same loop as peak.json; "
    "cuda_context_bytes = device memory in use right after CUDA starts, before torch allocates."
)


COMPILED_DESCRIPTION = (
    "As activations.json, with every transformer layer under torch.compile (nn.Module.compile, the default inductor "
    "backend: AOTAutograd's min-cut rematerialisation partitioner decides what the compiled layer saves); the "
    "embedding, final norm, output layer and loss stay eager. The compiled region's autograd function packs its saved "
    "tensors through the same hooks. saved_in_layer lists the distinct storages the one-layer model's layer saves "
    "(the rotary tables and a causal mask it saves are shared by every layer, so they count outside the layers)."
)

MOE_DESCRIPTION = (
    "As activations.json, for transformers' MoE layers (Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V2, DeepSeek-V3, "
    "gpt-oss) with "
    "the experts implementation transformers picks by default (grouped_mm). moe_block lists what the first MoE block "
    "saves, storage by storage (the storages first packed inside model.layers.0.mlp; with first_dense, DeepSeek's "
    "first_k_dense_replace, the two-layer model's model.layers.1.mlp, and the whole two-layer model is what is "
    "compared), and kept_bytes "
    "counts those a node reachable from the loss still holds (SavedTensorRecorder.name_ops): DeepSeek's group "
    "selection saves tensors on a branch that dies with the forward's locals, which autograd frees before backward."
)

KINDS = ("activations", "model_states", "large_shapes", "sharding", "peak", "op_lists", "compiled", "moe")


def measure_suite(small: bool, progress: Callable[[str], None] | None = None,
                  only: tuple[str, ...] = KINDS) -> dict[str, dict[str, Any]]:
    """Measure the small (CI) or full set of the kinds in `only`; return {file name: document}."""
    from builder.validate.large import large_cases, measure_large_case
    from builder.validate.measure import measure_activation_case
    from builder.validate.oplist import op_list, summarise_op_list
    from builder.validate.peak import measure_peak_case
    from builder.validate.sharding import measure_shard_case, shard_cases
    from builder.validate.states import measure_state_case

    say = progress or (lambda message: None)
    env = environment()
    documents: dict[str, dict[str, Any]] = {}

    def measure(kind: str, title: str, description: str, cases: list, run: Callable[[Any], dict[str, Any]]) -> None:
        if kind in only:
            say(f"{title}: {len(cases)} cases")
            documents[f"{kind}.json"] = document(kind, description, [run(case) for case in cases], env)

    measure("activations", "activations", ACTIVATIONS_DESCRIPTION,
            small_activation_cases() if small else full_activation_cases(), measure_activation_case)
    measure("model_states", "model states", STATES_DESCRIPTION, state_cases(), measure_state_case)
    measure("large_shapes", "large shapes (fake tensors)", LARGE_DESCRIPTION, large_cases(small=small),
            lambda named: measure_large_case(*named))
    measure("sharding", "sharding (FSDP2, fake process group)", SHARDING_DESCRIPTION, shard_cases(small=small),
            measure_shard_case)
    measure("peak", "peak by phase (real steps)", PEAK_DESCRIPTION, peak_cases(small=small), measure_peak_case)
    measure("moe", "MoE layers (transformers' MoE blocks)", MOE_DESCRIPTION, moe_cases(), measure_activation_case)
    if not small:  # inductor compiles C++ for every case: minutes, so not in the quick set
        measure("compiled", "compiled layers (torch.compile, inductor)", COMPILED_DESCRIPTION, compiled_cases(),
                measure_activation_case)
    if not small and "op_lists" in only:
        for case in op_list_cases():
            listing = op_list(case)
            listing["summary_bytes_per_unit"] = summarise_op_list(listing)
            listing["environment"] = env
            file_name = f"saved_tensors_{case.family}_{case.attention}_{DTYPES[case.dtype]}.json"
            documents[file_name] = listing
    return documents


def measure_gpu(progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """The peak cases on the CUDA device: {'peak_gpu.json': document} with the GPU, driver and CUDA."""
    from builder.validate.peak import gpu_environment, measure_peak_case

    say = progress or (lambda message: None)
    cases = peak_cases(small=False)
    env = {**environment(), **gpu_environment()}
    say(f"peak by phase on {env['gpu']}: {len(cases)} cases")
    return {"peak_gpu.json": document("peak", PEAK_GPU_DESCRIPTION, [measure_peak_case(case, "cuda") for case in cases],
                                      env)}
