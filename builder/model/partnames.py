"""Reader-facing names of the model's parts: the one registry.

A part's key ('optimizer/adam_m') is the model's stable API (the CLI's --json output, URL-free data, tests);
readers see the name registered here ('Adam first moment') in charts, their tables and text descriptions,
formula notes, exercise answers and the calculator (which receives this table as data). Every PartRule
checks at construction that its key is registered here (builder.model.partrules), and tests/test_partnames.py
enumerates the parts of many configurations and fails on one without a name. A bucket (a key's first path
segment, the stack a chart groups by) is a key too. Parts moved to host memory are 'host/<key>' (estimator),
named by `reader_name` from the key they moved.
"""

from __future__ import annotations

HOST = "host/"

PART_NAMES: dict[str, str] = {
    # Buckets, in builder.model.breakdown.BUCKETS order (also whole parts: 'weights', 'gradients', 'kv_cache').
    "weights": "Weights",
    "master": "Master weights",
    "gradients": "Gradients",
    "optimizer": "Optimizer",
    "activations": "Activations",
    "kv_cache": "KV cache",
    "comm": "Comm buffers",
    "overhead": "Overhead",
    "checkpoint": "Checkpoint save",
    # Weights (builder.model.states)
    "weights/quantised_linear": "Quantised linear weights",
    "weights/quantisation_constants": "Quantisation constants",
    "weights/low_precision_copies": "Low-precision weight copies",
    "weights/scaling_linear": "Linear weights with scaling factors",
    "weights/unquantised": "Unquantised weights",
    "weights/unquantised_fp32": "Unquantised weights cast to fp32",
    "weights/lora_adapters": "LoRA adapters",
    "weights/dequantised_linear": "Dequantised 4-bit weight",
    "weights/rotary_table": "Rotary position table",
    "weights/allocator_rounding": "Allocator rounding of the weights",
    # Gradients (states, step, peak's moments)
    "gradients/accumulation_buffer": "Gradient accumulation buffer",
    "gradients/tied_embedding_temporaries": "Tied-embedding gradient temporaries",
    "gradients/made_so_far": "Weight gradients made so far",
    "gradients/head_sum": "Output layer gradients being summed",
    # Optimizer (states, step)
    "optimizer/master": "Master weights",
    "optimizer/master_grads": "Gradients copied to fp32 for the step",
    "optimizer/grad_partition_fp32": "Gradient partition cast to fp32",
    "optimizer/adam_m": "Adam first moment",
    "optimizer/adam_v": "Adam second moment",
    "optimizer/momentum": "Momentum",
    "optimizer/adafactor_factors": "Adafactor factored second moment",
    "optimizer/step_temporaries": "Optimizer step temporaries",
    "optimizer/paged_in": "Paged optimizer states in use",
    # Activations (activations, autocast, step, peak's moments, serving, engines)
    "activations/layers": "Layer activations (Table 2 formula)",
    "activations/norms": "Norm activations",
    "activations/attention": "Attention activations",
    "activations/attention_scores": "Attention scores",
    "activations/dropout": "Dropout masks",
    "activations/mlp": "MLP activations",
    "activations/lora": "LoRA activations",
    "activations/head_lora": "Output layer's LoRA activations",
    "activations/router": "Router activations",
    "activations/embedding": "Embedding activations",
    "activations/final_norm": "Final norm activations",
    "activations/loss": "Loss activations",
    "activations/logits": "Logits",
    "activations/logits_fp32": "Logits in fp32",
    "activations/loss_chunk": "Loss chunk",
    "activations/final_hidden_fp32": "Final hidden states in fp32",
    "activations/embedding_outputs": "Held embedding outputs",
    "activations/loss_grads": "Loss gradients",
    "activations/float8_casts": "Float8 casts and copies",
    "activations/checkpoint": "Layer checkpoints",
    "activations/op_outputs": "Kept op outputs (per-op checkpointing)",
    "activations/offloaded": "Offloaded activations",
    "activations/recompute_working_layer": "Recomputed layer",
    "activations/recomputed_in_last_layer": "Tensors recomputed in the last layer",
    "activations/layer_temporaries": "Layer temporaries",
    "activations/first_layer": "First layer's saved tensors",
    "activations/autocast_weight_copies": "Autocast weight copies",
    "activations/profile_peak": "Profiling run's peak activations",
    "activations/working_set": "Serving working set",
    "activations/final_hidden": "Final hidden states",
    # Communication buffers (states)
    "comm/ddp_buckets": "DDP gradient buckets",
    "comm/gathered_params": "Gathered parameters",
    "comm/all_gather_output": "All-gather buffer",
    "comm/reused_params": "Parameters kept for reuse",
    "comm/unsharded_grads": "Unsharded gradients",
    "comm/reduce_bucket": "Gradient reduce bucket",
    "comm/reduce_scatter_input": "Reduce-scatter input",
    "comm/root_grads": "Root unit gradients",
    "comm/gathered_output": "Gathered output layer",
    "comm/output_reduce_scatter_input": "Output layer reduce-scatter input",
    "comm/gathered_embeddings": "Gathered token embedding",
    "comm/embedding_grads": "Token embedding gradients",
    # Saving a checkpoint (checkpoint)
    "checkpoint/state_dict_copies": "State dict copies",
    "checkpoint/gathered_units": "Units gathered for the save",
    # Overheads (overheads, engines)
    "overhead/allocator_reserve": "Allocator reserve",
    "overhead/framework": "Framework overhead",
    "overhead/fixed": "Fixed overhead",
    "overhead/cuda_context": "CUDA context",
    "overhead/non_torch": "Non-torch memory",
    "overhead/cuda_graphs": "CUDA graphs",
    "overhead/runtime_slack": "Runtime slack",
    "overhead/driver_reserve": "Driver reserve",
    "overhead/distributed": "Communication set-up",
    # Serving engines' accounting (engines)
    "unrequested": "Not requested by the engine",
    "kv_cache/concat_copy": "KV cache copy while a layer grows",
    "kv_cache/roll_copy": "KV cache copy while a sliding window rolls",
    "activations/latent_expansion": "Keys and values expanded from the latent",
}


def is_registered(key: str) -> bool:
    """Whether `key` (or, for 'host/<key>', the key it moved from) has a reader-facing name."""
    return key.removeprefix(HOST) in PART_NAMES


def reader_name(key: str) -> str:
    """The name readers see for part `key`: 'Adam first moment' for 'optimizer/adam_m',
    'Adam first moment (host memory)' for 'host/optimizer/adam_m'. KeyError for an unregistered key."""
    if key.startswith(HOST):
        return f"{PART_NAMES[key.removeprefix(HOST)]} (host memory)"
    return PART_NAMES[key]
