"""Record the tensors autograd saves for backward, and count their bytes by storage.

How a saved tensor is counted (the rule every number under content/validation/ follows):

- Every tensor autograd packs during the forward pass is seen by a
  `torch.autograd.graph.saved_tensors_hooks` pack hook. Tensors are grouped by the
  storage they live in (`untyped_storage()._cdata`, the StorageImpl; the same identity
  as `untyped_storage().data_ptr()` for real tensors, and it also works for fake ones).
- **storage bytes** (the number compared with the model): each distinct storage counts
  once, with the `nbytes()` of the WHOLE storage, because a view keeps its whole base
  alive. A tensor saved by several ops (the input of q, k and v projections; a weight and
  its transpose) therefore counts once.
- **tensor bytes** (reported next to it): per storage, the sum of `numel * element_size`
  over its distinct saved views (offset, shape, stride, dtype), capped at the storage
  size. It is smaller than storage bytes only when a saved view is a slice of a larger
  buffer.
- Storages of parameters are excluded (they are model states). Storages of module
  buffers (e.g. Llama's rotary `inv_freq`) are excluded from activations and reported as
  `buffer_bytes`. The caller's own inputs (`input_ids`, `labels`) are excluded and
  reported as `input_bytes`: they exist whether or not autograd saves them.
- Under non-reentrant activation checkpointing (transformers' default) the layer's own
  saves go through checkpoint's hooks, not ours; what stays alive is the layer's inputs,
  held by the checkpoint's recompute closure. `CheckpointProbe` records exactly those
  tensors (positional and keyword arguments of each checkpointed call).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

KINDS = ("activation", "parameter", "buffer", "input")


@dataclass
class SavedRecord:
    """One tensor packed for backward (or held by a checkpoint), in the order seen."""

    index: int
    module: str  # qualified module name active when it was saved ('' = top level)
    shape: tuple[int, ...]
    dtype: str
    tensor_bytes: int  # numel * element size of this view
    storage_bytes: int  # nbytes of the whole storage behind it
    kind: str  # 'activation', 'parameter', 'buffer' or 'input'
    first_index: int  # index of the first record with the same storage (== index if first)
    op: str | None = None  # grad_fn class name that saved it ('checkpoint' for checkpoint inputs)
    slot: str | None = None  # the grad_fn attribute it is saved as (e.g. 'mat1', 'result')
    storage_key: int = field(default=0, repr=False)
    view_key: tuple = field(default=(), repr=False)

    @property
    def is_duplicate(self) -> bool:
        """True when an earlier record already holds this storage."""
        return self.first_index != self.index

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (no internal keys)."""
        data = asdict(self)
        data.pop("storage_key")
        data.pop("view_key")
        data["shape"] = list(self.shape)
        data["duplicate_of"] = None if not self.is_duplicate else self.first_index
        data.pop("first_index")
        return data


def storage_key(tensor) -> int:
    """Identity of the storage behind a tensor (shared by all its views)."""
    return tensor.untyped_storage()._cdata


def storage_keys(tensors: Iterable) -> set[int]:
    """Storage identities of some tensors."""
    return {storage_key(t) for t in tensors}


def dtype_name(dtype) -> str:
    """'float32', 'bfloat16', 'int64', ... without the 'torch.' prefix."""
    return str(dtype).removeprefix("torch.")


class SavedTensorRecorder:
    """Context manager: records every tensor packed for backward while it is active."""

    def __init__(self, model=None, inputs: Iterable = ()) -> None:
        self.records: list[SavedRecord] = []
        self._tensors: list = []  # keeps saved tensors alive so storage identities stay unique
        self._first_by_storage: dict[int, int] = {}
        self._module_stack: list[str] = [""]
        self._handles: list = []
        self._unpacked: list[int] = []
        self._parameter_keys = storage_keys(model.parameters()) if model is not None else set()
        self._buffer_keys = storage_keys(model.buffers()) if model is not None else set()
        self._input_keys = storage_keys(inputs)
        self._model = model
        self._hooks = None

    # Context manager ------------------------------------------------------------------
    def __enter__(self) -> "SavedTensorRecorder":
        import torch

        if self._model is not None:
            self._track_modules(self._model)
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self._hooks.__exit__(*exc_info)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    # Hooks ----------------------------------------------------------------------------
    def _track_modules(self, model) -> None:
        """Keep a stack of qualified module names so each record knows where it was saved."""
        for name, module in model.named_modules():
            self._handles.append(module.register_forward_pre_hook(self._make_enter(name)))
            self._handles.append(module.register_forward_hook(self._leave_module, always_call=True))

    def _make_enter(self, name: str):
        """A forward pre-hook that pushes `name`."""
        def enter(module, args) -> None:
            self._module_stack.append(name)
        return enter

    def _leave_module(self, module, args, output) -> None:
        """Forward hook: pop the module name."""
        if len(self._module_stack) > 1:
            self._module_stack.pop()

    def _pack(self, tensor):
        """Pack hook: record the tensor, return (index, tensor) so unpacking can name it."""
        record = self.record(tensor)
        return record.index, tensor

    def _unpack(self, packed):
        """Unpack hook: remember which record was unpacked (used to name ops)."""
        index, tensor = packed
        self._unpacked.append(index)
        return tensor

    # Recording ------------------------------------------------------------------------
    def classify_storage(self, key: int) -> str:
        """'parameter', 'buffer', 'input' or 'activation' for a storage identity."""
        if key in self._parameter_keys:
            return "parameter"
        if key in self._buffer_keys:
            return "buffer"
        if key in self._input_keys:
            return "input"
        return "activation"

    def record(self, tensor, op: str | None = None, slot: str | None = None) -> SavedRecord:
        """Add one tensor; dedup is by storage identity."""
        storage = tensor.untyped_storage()
        key = storage._cdata
        index = len(self.records)
        first = self._first_by_storage.setdefault(key, index)
        record = SavedRecord(
            index=index,
            module=self._module_stack[-1],
            shape=tuple(int(n) for n in tensor.shape),
            dtype=dtype_name(tensor.dtype),
            tensor_bytes=int(tensor.numel()) * tensor.element_size(),
            storage_bytes=int(storage.nbytes()),
            kind=self.classify_storage(key),
            first_index=first,
            op=op,
            slot=slot,
            storage_key=key,
            view_key=(key, int(tensor.storage_offset()), tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype),
        )
        self.records.append(record)
        self._tensors.append(tensor)
        return record

    def name_ops(self, root) -> None:
        """Walk the autograd graph from `root` (a grad_fn) and name each record's op and slot.

        Reads each node's `_saved_*` attributes (and `saved_tensors` of custom Functions),
        which calls our unpack hook and tells which record the attribute holds. Must not be
        used on graphs with non-reentrant checkpoints (unpacking there recomputes).
        """
        seen: set[int] = set()
        stack = [root]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            self._name_node(node)
            stack.extend(next_node for next_node, _ in node.next_functions)

    def _name_node(self, node) -> None:
        """Name the records one graph node holds."""
        op = type(node).__name__
        slots = sorted(a.removeprefix("_raw_saved_") for a in dir(node) if a.startswith("_raw_saved_"))
        for slot in slots:
            self._unpacked.clear()
            try:
                getattr(node, "_saved_" + slot)
            except (RuntimeError, AttributeError):  # a custom Function's ctx (bitsandbytes' MatMul4Bit) has no _saved_
                continue
            self._assign(op, slot)
        if hasattr(node, "saved_tensors") and not slots:
            self._unpacked.clear()
            try:
                node.saved_tensors
            except RuntimeError:
                return
            self._assign(op, "saved_tensors")

    def _assign(self, op: str, slot: str) -> None:
        """Give the records unpacked just now their op and slot (first name wins)."""
        for index in self._unpacked:
            record = self.records[index]
            if record.op is None:
                record.op, record.slot = op, slot
        self._unpacked.clear()


class CheckpointProbe:
    """Wraps each checkpointed layer's `_gradient_checkpointing_func` to record the inputs it keeps."""

    def __init__(self, model, recorder: SavedTensorRecorder) -> None:
        self.model = model
        self.recorder = recorder
        self._originals: list[tuple[Any, Any]] = []

    def __enter__(self) -> "CheckpointProbe":
        for name, module in self.model.named_modules():
            original = getattr(module, "_gradient_checkpointing_func", None)
            if original is None or not getattr(module, "gradient_checkpointing", False):
                continue
            self._originals.append((module, original))
            module._gradient_checkpointing_func = self._wrap(name, original)
        return self

    def __exit__(self, *exc_info) -> None:
        for module, original in self._originals:
            module._gradient_checkpointing_func = original
        self._originals.clear()

    def _wrap(self, name: str, original):
        """A checkpoint function that records the tensors the checkpoint will hold."""
        def checkpointed(function, *args, **kwargs):
            held = list(collect_tensors(args)) + list(collect_tensors(kwargs))
            held += list(collect_tensors(getattr(function, "keywords", {})))
            self.recorder._module_stack.append(name)
            try:
                for tensor in held:
                    self.recorder.record(tensor, op="checkpoint", slot="input")
            finally:
                self.recorder._module_stack.pop()
            return original(function, *args, **kwargs)
        return checkpointed


def collect_tensors(value) -> Iterable:
    """Every tensor inside nested tuples, lists and dicts."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from collect_tensors(item)
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from collect_tensors(value[key])


@dataclass(frozen=True)
class SavedTotals:
    """Bytes of saved tensors, deduplicated by storage, by kind."""

    activation_storage_bytes: int
    activation_tensor_bytes: int
    parameter_bytes: int
    buffer_bytes: int
    input_bytes: int
    records: int
    distinct_storages: int

    def as_dict(self) -> dict[str, int]:
        """JSON-ready."""
        return asdict(self)


def total_saved(records: list[SavedRecord]) -> SavedTotals:
    """Sum storage bytes (each storage once) and tensor bytes (each distinct view once, capped)."""
    storage_bytes: dict[int, int] = {}
    kind_of: dict[int, str] = {}
    views: dict[int, dict[tuple, int]] = {}
    for record in records:
        storage_bytes[record.storage_key] = record.storage_bytes
        kind_of[record.storage_key] = record.kind
        views.setdefault(record.storage_key, {})[record.view_key] = record.tensor_bytes
    by_kind = {kind: 0 for kind in KINDS}
    activation_tensor_bytes = 0
    for key, nbytes in storage_bytes.items():
        by_kind[kind_of[key]] += nbytes
        if kind_of[key] == "activation":
            activation_tensor_bytes += min(nbytes, sum(views[key].values()))
    return SavedTotals(
        activation_storage_bytes=by_kind["activation"],
        activation_tensor_bytes=activation_tensor_bytes,
        parameter_bytes=by_kind["parameter"],
        buffer_bytes=by_kind["buffer"],
        input_bytes=by_kind["input"],
        records=len(records),
        distinct_storages=len(storage_bytes),
    )
