"""Validation: measure what PyTorch really stores, and compare it with the memory model.

Modules, one responsibility each:
  cases        - the measured cases as plain data (no torch)
  saved        - record the tensors autograd saves for backward, deduplicated by storage
  hf_models    - build small Hugging Face models from configs (random weights, no download)
  measure      - activation bytes per layer and outside the layers; per-op saved-tensor lists
  states       - parameter, gradient and optimizer-state bytes after a real optimizer step
  large        - the same activation counting under FakeTensorMode for 7B-70B layer shapes
  sharding     - per-rank model-state bytes under FSDP2 with a fake process group
  results      - versions, machine, deterministic JSON files under content/validation/
  compare      - predicted (builder.model.estimate()) vs measured, with tolerances
  published    - published numbers (papers, docs, engine logs) as cases, and the model's prediction of each
  cli          - `python -m builder validate`

torch and transformers are imported lazily (inside functions), so the site builds
without the `validate` extra.
"""

MISSING_EXTRA = "validate needs the 'validate' extra: pip install -e '.[validate]'"


class MissingExtra(RuntimeError):
    """torch or transformers is not installed."""


def require_torch():
    """Import torch and transformers, or raise MissingExtra with the one-line install hint."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as error:
        raise MissingExtra(f"{MISSING_EXTRA} ({error})") from error
    return torch
