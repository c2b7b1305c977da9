"""Run every measurement of a set (small or full) and return the result documents by file name."""

from __future__ import annotations

from typing import Any, Callable

from builder.validate.cases import DTYPES, full_activation_cases, op_list_cases, small_activation_cases, state_cases
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


def measure_suite(small: bool, progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Measure the small (CI) or full set; return {file name: document}."""
    from builder.validate.large import large_cases, measure_large_case
    from builder.validate.measure import measure_activation_case
    from builder.validate.oplist import op_list, summarise_op_list
    from builder.validate.sharding import measure_shard_case, shard_cases
    from builder.validate.states import measure_state_case

    say = progress or (lambda message: None)
    env = environment()
    documents: dict[str, dict[str, Any]] = {}
    cases = small_activation_cases() if small else full_activation_cases()
    say(f"activations: {len(cases)} cases")
    documents["activations.json"] = document("activations", ACTIVATIONS_DESCRIPTION,
                                             [measure_activation_case(case) for case in cases], env)
    states = state_cases()
    say(f"model states: {len(states)} cases")
    documents["model_states.json"] = document("model_states", STATES_DESCRIPTION,
                                              [measure_state_case(case) for case in states], env)
    large = large_cases(small=small)
    say(f"large shapes (fake tensors): {len(large)} cases")
    documents["large_shapes.json"] = document("large_shapes", LARGE_DESCRIPTION,
                                              [measure_large_case(name, case) for name, case in large], env)
    shards = shard_cases(small=small)
    say(f"sharding (FSDP2, fake process group): {len(shards)} cases")
    documents["sharding.json"] = document("sharding", SHARDING_DESCRIPTION,
                                          [measure_shard_case(case) for case in shards], env)
    if not small:
        for case in op_list_cases():
            listing = op_list(case)
            listing["summary_bytes_per_unit"] = summarise_op_list(listing)
            listing["environment"] = env
            file_name = f"saved_tensors_{case.family}_{case.attention}_{DTYPES[case.dtype]}.json"
            documents[file_name] = listing
    return documents
