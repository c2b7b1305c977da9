"""Peak memory by phase of a real training step (builder.model.peak predicts the same moments).

Two steps run; the second is measured (the optimizer states exist by then, as in every
step after the first). The loop is the one builder.model.peak assumes:
`zero_grad(set_to_none=True)`, for each micro-batch a forward that keeps only the loss and
`loss.backward()`, then `optimizer.step()`. Optimizers use torch's foreach implementation,
the default on CUDA, also on CPU (where the default is a per-tensor loop).

Meters:
- CPU: every allocation and free of the CPU allocator, from torch.profiler's memory events
  (profile_memory=True), summed in time order from before the model is built, so live
  bytes are absolute; the largest value inside each phase is that phase's peak. Nothing
  else allocates in between (one process, no caching allocator on CPU).
  The same events give the peak inside each autograd node the measured backward runs (`node_peaks`: the
  profiler's 'autograd::engine::evaluate_function' ranges), in the order they ran: a moment inside the
  backward (a norm's, a layer's) measured on its own, not only the phase's largest.
- CUDA: torch.cuda.reset_peak_memory_stats() before each phase and
  max_memory_allocated() / max_memory_reserved() after it; the CUDA context is the device
  memory in use (cudaMemGetInfo) right after CUDA starts, before torch allocates anything.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import itertools
from typing import Any, Iterator

from builder.validate.cases import PeakCase, hf_config

MEASURED_PHASES = ("forward", "backward", "optimizer_step")
TAG = "tm_phase:"
NODE = "autograd::engine::evaluate_function: "  # the profiler's range around each autograd node's run


class CpuMeter:
    """Live bytes of the CPU allocator from profiler memory events, peak per tagged phase."""

    device = "cpu"

    def __init__(self) -> None:
        self._profile = None
        self.peaks: dict[str, int] = {}
        self.node_peaks: list[tuple[str, int]] = []  # (autograd node, peak live bytes inside it), measured backward

    def __enter__(self) -> "CpuMeter":
        from torch.profiler import ProfilerActivity, profile

        self._profile = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        self._profile.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._profile.__exit__(*exc)
        if exc[0] is None:
            events = self._profile.profiler.kineto_results.events()
            self.peaks = self._peaks(events)
            self.node_peaks = self._node_peaks(events)

    @contextlib.contextmanager
    def phase(self, name: str, measured: bool) -> Iterator[None]:
        """Tag the code inside as phase `name` (only when `measured`)."""
        if not measured:
            yield
            return
        from torch.profiler import record_function

        with record_function(TAG + name):
            yield

    @staticmethod
    def _timeline(events) -> tuple[list[int], list[int]]:
        """The times of the allocator's changes and the live bytes after each."""
        changes = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
        return [time for time, _ in changes], list(itertools.accumulate(amount for _, amount in changes))

    @staticmethod
    def _peak_in(times: list[int], live: list[int], start: int, end: int) -> int:
        """What is live as the window starts, and after each change inside it (a window that allocates nothing, such
        as a step already run inside backward, peaks at what it starts with)."""
        first, last = bisect.bisect_left(times, start), bisect.bisect_right(times, end)
        return max([live[first - 1] if first else 0, *live[first:last]])

    @classmethod
    def _peaks(cls, events) -> dict[str, int]:
        windows = sorted((e.start_ns(), e.start_ns() + e.duration_ns(), e.name()[len(TAG):])
                         for e in events if e.name().startswith(TAG))
        times, live = cls._timeline(events)
        peaks: dict[str, int] = {}
        for start, end, name in windows:
            peaks[name] = max(peaks.get(name, 0), cls._peak_in(times, live, start, end))
        return peaks

    @classmethod
    def _node_peaks(cls, events) -> list[tuple[str, int]]:
        """Each autograd node run inside the last measured backward, in order, with the peak live bytes inside it."""
        backward = [(e.start_ns(), e.start_ns() + e.duration_ns()) for e in events if e.name() == TAG + "backward"]
        if not backward:
            return []
        start, end = max(backward)
        times, live = cls._timeline(events)
        return [(name[len(NODE):], cls._peak_in(times, live, begin, finish)) for begin, finish, name in sorted(
            (e.start_ns(), e.start_ns() + e.duration_ns(), e.name()) for e in events
            if e.name().startswith(NODE) and start <= e.start_ns() <= end)]


class CudaMeter:
    """torch.cuda peak statistics per phase (max over repeats of a phase)."""

    device = "cuda"

    def __init__(self) -> None:
        self.peaks: dict[str, int] = {}
        self.reserved: dict[str, int] = {}
        self.context_bytes = 0

    def __enter__(self) -> "CudaMeter":
        import torch

        torch.cuda.init()
        free, total = torch.cuda.mem_get_info()
        self.context_bytes = int(total - free - torch.cuda.memory_reserved())
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    @contextlib.contextmanager
    def phase(self, name: str, measured: bool) -> Iterator[None]:
        """Record the allocator's peaks over the code inside (only when `measured`)."""
        import torch

        if not measured:
            yield
            return
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        yield
        torch.cuda.synchronize()
        self.peaks[name] = max(self.peaks.get(name, 0), int(torch.cuda.max_memory_allocated()))
        self.reserved[name] = max(self.reserved.get(name, 0), int(torch.cuda.max_memory_reserved()))


def chunked_loss(model, token_ids):
    """torchtune's chunked loss (torchtune/modules/loss/ce_chunked_output_loss.py, 0.6) for a Llama-family model
    (its decoder is `model.model`): the output layer makes the logits in LOSS_CHUNKS chunks along the sequence
    (all of them, as its model returns them), then each chunk is upcast and cross-entropied on its own, summed
    and divided by the tokens counted."""
    import torch.nn.functional as F

    from builder.model.step import LOSS_CHUNKS

    hidden = model.model(input_ids=token_ids).last_hidden_state
    labels = F.pad(token_ids, (0, 1), value=-100)[..., 1:]
    logits = [model.lm_head(chunk) for chunk in hidden.chunk(LOSS_CHUNKS, dim=1)]
    total = sum(F.cross_entropy(chunk.float().flatten(0, 1), target.flatten(), reduction="sum", ignore_index=-100)
                for chunk, target in zip(logits, labels.chunk(LOSS_CHUNKS, dim=1)))
    return total / (labels != -100).sum()


class ChunkedOutputLoss:
    """torchtune's CEWithChunkedOutputLoss as torchtune writes it (torchtune/modules/loss/ce_chunked_output_loss.py at
    commit 1814feb17a9038e1a8053ce93111bd26774a8db6, the commit of the README's memory table; torchtune is not a
    dependency): compute_cross_entropy upcasts one chunk and cross-entropies it (reduction "sum"); forward counts the
    labels kept, flattens each chunk of labels and logits and sums the chunks' losses one at a time."""

    def __init__(self, num_output_chunks: int = 8, ignore_index: int = -100) -> None:
        self.num_output_chunks = num_output_chunks
        self.ignore_index = ignore_index

    def compute_cross_entropy(self, logits, labels, normalize: bool = True):
        """Upcast logits to fp32 and compute cross entropy loss."""
        import torch.nn.functional as F

        return F.cross_entropy(logits.float(), labels, ignore_index=self.ignore_index, reduction="sum")

    def __call__(self, logits: list, labels):
        total_elements = (labels != self.ignore_index).sum()
        labels = [target_chunk.reshape(-1) for target_chunk in labels.chunk(self.num_output_chunks, dim=1)]
        logits = [logit_chunk.reshape(-1, logit_chunk.size(-1)) for logit_chunk in logits]
        total_loss = 0.0
        for logits_chunk, labels_chunk in zip(logits, labels):
            total_loss += self.compute_cross_entropy(logits_chunk, labels_chunk)
        return total_loss / total_elements


def compile_loss(loss: ChunkedOutputLoss) -> ChunkedOutputLoss:
    """torchtune's training.compile_loss for CEWithChunkedOutputLoss (torchtune/training/_compile.py at 1814feb, which
    recipes/full_finetune_single_device.py calls when compile=True): only compute_cross_entropy, the upcast and the
    cross-entropy of one chunk, is compiled (inductor, TORCH_COMPILE_BACKEND's default), in place; the chunking stays
    eager. Dynamo's caches are cleared first, so each case compiles afresh."""
    import torch

    torch._dynamo.reset()
    loss.compute_cross_entropy = torch.compile(loss.compute_cross_entropy, backend="inductor")
    return loss


def torchtune_chunked_loss(loss_fn: ChunkedOutputLoss):
    """A loss_of for training_step that runs a step as torchtune's recipe does with the chunked loss: the decoder's
    last hidden state cut into num_output_chunks along the sequence, the output layer applied to each
    (TransformerDecoder.chunked_output, torchtune/modules/transformer.py at 1814feb), the labels shifted by one and
    padded with ignore_index (full_finetune_single_device.py _loss_step), then `loss_fn` over the list."""
    import torch

    def loss_of(model, token_ids):
        hidden = model.model(input_ids=token_ids).last_hidden_state
        ignore = torch.full((token_ids.shape[0], 1), loss_fn.ignore_index, dtype=token_ids.dtype,
                            device=token_ids.device)
        labels = torch.hstack((token_ids[..., 1:], ignore))
        logits = [model.lm_head(chunk) for chunk in hidden.chunk(loss_fn.num_output_chunks, dim=1)]
        return loss_fn(logits, labels)

    return loss_of


def training_step(model, optimizer, token_ids, grad_accum: int, meter, measured: bool, autocast: bool = False,
                  loss_of=None) -> None:
    """One step: zero_grad(set_to_none), forward (under torch.autocast(bfloat16) when `autocast`) + backward
    per micro-batch, optimizer step."""
    import torch

    optimizer.zero_grad(set_to_none=True)
    for _ in range(grad_accum):
        amp = torch.autocast(token_ids.device.type, dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        with meter.phase("forward", measured), amp:
            loss = loss_of(model, token_ids) if loss_of else model(input_ids=token_ids, labels=token_ids).loss
        with meter.phase("backward", measured):
            loss.backward()
        del loss
    with meter.phase("optimizer_step", measured):
        optimizer.step()


class InBackward:
    """One for-loop optimizer per parameter, stepped from its post-accumulate-grad hook, which then frees the
    gradient (the PyTorch tutorial "How to save memory by fusing the optimizer step into the backward pass").
    step() and zero_grad() have nothing left to do; `state` gathers the per-parameter optimizers' states."""

    def __init__(self, name: str, parameters: list) -> None:
        from builder.validate.states import make_optimizer

        self.optimizers = {p: make_optimizer(name, [p], foreach=False) for p in parameters}
        for p in parameters:
            p.register_post_accumulate_grad_hook(self._step)

    def _step(self, parameter) -> None:
        self.optimizers[parameter].step()
        self.optimizers[parameter].zero_grad(set_to_none=True)

    @property
    def state(self) -> dict:
        return {p: s for o in self.optimizers.values() for p, s in o.state.items()}

    def step(self) -> None:
        """The steps ran inside backward."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The hooks freed every gradient."""


def step_optimizer(case: PeakCase, trainable: list):
    """The optimizer of `case` as its implementation runs it (foreach, for-loop, fused or inside backward)."""
    from builder.validate.states import make_optimizer

    if case.optimizer_impl == "in-backward":
        return InBackward(case.optimizer, trainable)
    if case.optimizer_impl == "fused":
        return make_optimizer(case.optimizer, trainable, fused=True)
    return make_optimizer(case.optimizer, trainable, foreach=case.optimizer_impl == "foreach")


def measure_peak_case(case: PeakCase, device: str = "cpu", convert=None, nodes: tuple[str, ...] = ()) -> dict[str, Any]:
    """Peak live bytes per phase of the second of two training steps of `case` (`convert`: a function that swaps
    the built model's modules before it trains, as torchao's float8 conversion does: builder.validate.float8) and, on
    CPU, inside each run of the autograd nodes named in `nodes` ('PowBackward0'), in order (measured['nodes'])."""
    from builder.validate.hf_models import build_model, make_token_ids
    from builder.validate.measure import enable_checkpointing
    from builder.validate.states import add_lora, count_model_states
    from builder.model.step import LOSS_CHUNKS

    config = hf_config(case.forward, case.layers)
    # The previous case's tensors (a model in a reference cycle) are freed now, not inside this case's profile,
    # where their release would count against this case's live bytes.
    gc.collect()
    meter = CudaMeter() if device == "cuda" else CpuMeter()
    with meter:
        model = build_model(config, case.forward.dtype)
        if convert is not None:
            convert(model)
        if case.lora_rank:
            add_lora(model, case.lora_rank, ("q", "k", "v", "o"))  # adapters are made on the CPU: add, then move
        model = model.to(device)
        if case.forward.recompute == "full":
            enable_checkpointing(model)
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = step_optimizer(case, trainable)
        token_ids = make_token_ids(case.forward.batch, case.forward.seq_len, case.forward.vocab).to(device)
        loss_of = chunked_loss if case.loss == "chunked" else None
        if case.loss == "chunked-compiled":
            loss_of = torchtune_chunked_loss(compile_loss(ChunkedOutputLoss(LOSS_CHUNKS)))
        for step in range(2):  # the first step compiles (unmeasured); the second runs the compiled chunks
            training_step(model, optimizer, token_ids, case.grad_accum, meter, measured=step == 1, loss_of=loss_of,
                          autocast=case.forward.autocast)
        states = count_model_states(model, optimizer)
    measured = {f"peak_{name}": meter.peaks[name] for name in MEASURED_PHASES}
    measured["peak_phase"] = max(MEASURED_PHASES, key=lambda name: meter.peaks[name])
    measured["input_bytes"] = int(token_ids.numel() * token_ids.element_size())
    measured["optimizer_step_bytes"] = states["optimizer_step_bytes"]
    measured["buffer_bytes"] = sum(int(b.numel() * b.element_size()) for b in model.buffers())
    if nodes and isinstance(meter, CpuMeter):
        measured["nodes"] = [[name, peak] for name, peak in meter.node_peaks if name in nodes]
    if isinstance(meter, CudaMeter):
        measured.update({f"reserved_{name}": meter.reserved[name] for name in MEASURED_PHASES})
        measured["cuda_context_bytes"] = meter.context_bytes
    return {"name": case.name, "inputs": case.as_dict(), "hf_config": config, "device": device, "measured": measured}


def gpu_environment() -> dict[str, str]:
    """The GPU, its driver and the CUDA torch was built with (for results measured on one)."""
    import subprocess

    import torch

    driver = "unknown"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30, check=True).stdout.strip() or driver
    return {"gpu": torch.cuda.get_device_name(), "driver": driver, "cuda": str(torch.version.cuda),
            "gpu_memory_bytes": str(torch.cuda.get_device_properties(0).total_memory)}
