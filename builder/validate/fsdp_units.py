"""FSDP2's units at the output layer's backward, measured on CPU with a fake process group.

One process plays rank 0 of `world_size` (`dist.init_process_group('fake', ...)`: every collective returns correctly
shaped tensors and moves nothing), as builder.validate.sharding does. A small Llama (transformers' LlamaForCausalLM, fp32)
runs as torchtune's full fine-tuning recipe runs its decoder: the final hidden state cut into 8 chunks along the
sequence, the output layer called on each (torchtune/modules/transformer.py TransformerDecoder.chunked_output at
30b8519), each chunk's logits upcast and cross-entropied (CEWithChunkedOutputLoss). It is wrapped as
torchtune/training/_distributed.py shard_model wraps it (30b8519): fully_shard on every module whose name matches
(the layers and, for the 'custom' layout, torchtune's custom_sharded_layers tok_embeddings and output, here
transformers' embed_tokens and lm_head), from the last module up, then on the whole model, the root unit.

torchtune passes its reshard_after_forward (True) to every fully_shard call, the root's too; fully_shard left to its
default (reshard_after_forward=None) reshards every unit but the root after the forward (_fsdp_state.py _lazy_init:
the root's post_forward_mesh_info = None), and accelerate 1.15's fsdp2_prepare_model and torchtitan leave the root so.
`reshard_root` picks between the two; `loss_inside` computes the loss in the root's forward, as transformers' causal
LMs do when given labels, or on the logits it returns, as torchtune's recipes and torchtitan's Trainer
(torchtitan/trainer.py _forward_backward_body at b5bcd76) do. The 'titan' layout is torchtitan's
(torchtitan/distributed/fsdp.py apply_fsdp_to_decoder at b5bcd76) and accelerate 1.15's: the token embedding, then
fully_shard([final norm, output layer], reshard_after_forward=False), then the blocks, the root left to the default;
`chunks` 1 calls the output layer once, as torchtitan's decoder and transformers' causal LMs do.

Two steps run (AdamW, for-loop); the second is measured: the CPU allocator's live bytes from torch.profiler's memory
events (builder.validate.peak.CpuMeter's meter) and, at each FSDP2 pre-forward (after it), pre-backward (before and
after it) and post-backward hook (FSDPParamGroup.pre_forward, .pre_backward and .post_backward, wrapped here for the
measurement and restored after), after the final norm's forward and as its output gets its gradient, as each chunk's
logits get theirs, and after the loss, a marker with the units gathered then, the bytes FSDP holds gathered (GATHERED)
and the parameters whose unsharded gradient the post-backward finds.
`moments` reads the model's moments of a step (builder.model.step.PHASES) off those markers.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import itertools
from typing import Any, Iterator

# blocks + root; blocks + token embedding + output layer + root (torchtune's shard_model); blocks + token embedding +
# final norm with output layer + root (torchtitan's apply_fsdp_to_decoder, accelerate 1.15's fsdp2_prepare_model)
LAYOUTS = ("default", "custom", "titan")
CHUNKS = 8  # torchtune's CEWithChunkedOutputLoss num_output_chunks (builder.model.step.LOSS_CHUNKS)
MARK = "fsdp_units:"


def llama_config(layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2, ffn: int = 176,
                 vocab: int = 2048) -> dict[str, Any]:
    """A small untied Llama config.json (transformers' LlamaConfig keys), eager attention."""
    return {"model_type": "llama", "num_hidden_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads, "head_dim": hidden // heads, "intermediate_size": ffn,
            "vocab_size": vocab, "max_position_embeddings": 512, "attention_dropout": 0.0,
            "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": None,
            "attn_implementation": "eager"}


def _decoder(lm, loss_inside: bool, chunks: int = CHUNKS):
    """torchtune's TransformerDecoder forward with output chunks, over a transformers causal LM: the decoder's last
    hidden state (after the final norm), the output layer on each of `chunks` chunks along the sequence (1: the
    output layer called once on the whole sequence, as transformers' causal LMs and torchtitan's Decoder do). With
    `loss_inside` the forward returns the loss instead, as transformers' causal LMs do when given labels
    (LlamaForCausalLM.forward calls self.loss_function): the root unit's forward then ends after the loss.
    `hooks`, when set, is the pair of callbacks `_loss` takes and one called with a chunk's index as its logits get
    their gradient (registered after the output layer's call, so after the hook FSDP's post-forward puts there)."""
    from torch import nn

    class ChunkedDecoder(nn.Module):
        def __init__(self, lm) -> None:
            super().__init__()
            self.lm = lm
            self.hooks = (None, None, None)

        def forward(self, token_ids):
            hidden = self.lm.model(input_ids=token_ids).last_hidden_state
            logits = [self.lm.lm_head(chunk) for chunk in hidden.chunk(chunks, dim=1)]
            on_grad, on_loss, on_chunk = self.hooks
            if on_chunk is not None:
                for index, chunk in enumerate(logits):
                    chunk.register_hook(lambda grad, index=index: on_chunk(index))
            return _loss(logits, token_ids, on_grad, on_loss) if loss_inside else logits

    return ChunkedDecoder(lm)


def _shard(decoder, layout: str, reshard_root: bool) -> None:
    """torchtune's shard_model: fully_shard on each matching module from the last up, then on the root; with
    torchtune's reshard_after_forward=True on every call (`reshard_root`), or fully_shard's default. The 'titan'
    layout is torchtitan's apply_fsdp_to_decoder for an untied decoder under its default policy without pipeline
    parallelism (torchtitan/distributed/fsdp.py at b5bcd76): the token embedding with reshard_after_forward=True, the
    final norm and the output layer as one unit with reshard_after_forward=False ("As an optimization, do not
    reshard_after_forward the last layers by default since FSDP would prefetch them immediately"), every block with
    True, the model with fully_shard's default; accelerate 1.15's fsdp2_prepare_model wraps the same units so."""
    from torch.distributed.fsdp import fully_shard

    if layout == "titan":
        if reshard_root:
            raise ValueError("torchtitan leaves the root unit to fully_shard's default (reshard_root=False)")
        model = decoder.lm.model
        fully_shard(model.embed_tokens, reshard_after_forward=True)
        fully_shard([model.norm, decoder.lm.lm_head], reshard_after_forward=False)
        for layer in model.layers:
            fully_shard(layer, reshard_after_forward=True)
        fully_shard(decoder)
        return
    kwargs = {"reshard_after_forward": True} if reshard_root else {}
    custom = ("lm.model.embed_tokens", "lm.lm_head") if layout == "custom" else ()
    for name, module in reversed(list(decoder.named_modules())):
        parts = name.split(".")
        if (len(parts) == 4 and parts[:3] == ["lm", "model", "layers"] and parts[3].isdigit()) or name in custom:
            fully_shard(module, **kwargs)
    fully_shard(decoder, **kwargs)


def _loss(logits: list, token_ids, on_grad=None, on_loss=None):
    """CEWithChunkedOutputLoss: labels shifted by one (the last ignored), each chunk upcast and summed (one chunk:
    torchtitan's cross_entropy_loss, the logits upcast and summed, over the valid tokens). `on_grad`,
    when given, is called as each chunk's cross-entropy input (the upcast chunk, flattened: a view, so its gradient
    comes before the chunk's own, as an fp32 upcast's does before a 16-bit chunk's) gets its gradient; `on_loss` once
    the loss is computed."""
    import torch
    import torch.nn.functional as F

    ignore = torch.full((token_ids.shape[0], 1), -100, dtype=token_ids.dtype)
    labels = torch.hstack((token_ids[..., 1:], ignore))

    def upcast(chunk):
        wide = chunk.float().flatten(0, 1)
        if on_grad is not None:
            wide.register_hook(lambda grad: on_grad())
        return wide

    total = sum(F.cross_entropy(upcast(chunk), target.flatten(), ignore_index=-100, reduction="sum")
                for chunk, target in zip(logits, labels.chunk(len(logits), dim=1), strict=True))
    loss = total / (labels != -100).sum()
    if on_loss is not None:
        on_loss()
    return loss


def _storage_bytes(tensors) -> dict[int, int]:
    """Each distinct storage among `tensors` (by address) -> its bytes, freed (resized to 0) ones left out."""
    sizes = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        if storage.nbytes():
            sizes[storage.data_ptr()] = storage.nbytes()
    return sizes


def gathered_bytes(groups) -> dict[str, int]:
    """What FSDP2 holds gathered now, by where it is held (GATHERED): the unsharded parameters of every unit (each
    FSDPParam's all_gather_outputs, freed by resizing their storage to 0), the all-gather outputs of units prefetched
    and not copied out yet (FSDPParamGroup._all_gather_result), and the all-gather output the forward keeps until the
    next unit's copy-out or the root's post-forward (comm_ctx.all_gather_state: _fsdp_param_group.py wait_for_unshard,
    "Defer free to allow for overlap of this copy-out with next all-gather")."""
    unsharded = _storage_bytes(t for g in groups for p in g.fsdp_params for t in p.all_gather_outputs)
    pending = _storage_bytes(g._all_gather_result.all_gather_output for g in groups
                             if g._all_gather_result is not None and g._all_gather_result.all_gather_output is not None)
    held = _storage_bytes(g.comm_ctx.all_gather_state.all_gather_result.all_gather_output for g in groups
                          if g.comm_ctx.all_gather_state is not None)
    return {"unsharded": sum(unsharded.values()), "prefetched": sum(pending.values()), "held": sum(held.values())}


GATHERED = ("unsharded", "prefetched", "held")


@contextlib.contextmanager
def _markers(marks: list, decoder) -> Iterator[Any]:
    """Wrap FSDPParamGroup.pre_forward, pre_backward and post_backward: each call leaves a profiler marker and a row
    in `marks` (the hook, its unit, the units gathered, the bytes gathered, the parameters with an unsharded
    gradient); a forward hook on the final norm marks its output, and a hook on that output the start of the final
    norm's backward (once every chunk's output-layer backward has made its gradient). Yields `mark(hook, unit)` for
    markers of the loop's own."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard import _fsdp_param_group as groups
    from torch.profiler import record_function

    cls = groups.FSDPParamGroup
    pre_forward, pre, post = cls.pre_forward, cls.pre_backward, cls.post_backward
    # A unit of several modules (fully_shard([norm, lm_head])) is one state on each: listed once.
    every = list({id(group): group for module in decoder.modules() if isinstance(module, FSDPModule)
                  for group in module._get_fsdp_state()._fsdp_param_groups}.values())

    def gathered() -> tuple[str, ...]:
        # Unsharded, or all-gathered by a prefetch whose copy-out waits for the unit's own pre-backward.
        return tuple(sorted(g._module_fqn or "root" for g in every
                            if g.is_unsharded or g._all_gather_result is not None))

    def mark(hook: str, unit: str, graded: tuple[str, ...] = ()) -> None:
        marks.append({"hook": hook, "unit": unit, "gathered": gathered(), "bytes": gathered_bytes(every),
                      "grads": graded})
        with record_function(f"{MARK}{len(marks) - 1}"):
            pass

    def name(group) -> str:
        return group._module_fqn or "root"

    def wrapped_pre_forward(self, *args: Any) -> Any:
        out = pre_forward(self, *args)
        mark("pre_forward", name(self))
        return out

    def pre_backward(self, *args: Any) -> Any:
        mark("pre", name(self))
        out = pre(self, *args)
        mark("pre_done", name(self))
        return out

    def post_backward(self, *args: Any) -> Any:
        graded = tuple(p._param_fqn for p in self.fsdp_params
                       if hasattr(p, "_unsharded_param") and p.unsharded_param.grad is not None)
        mark("post", name(self), graded)
        return post(self, *args)

    def final_norm(module, args, output) -> None:
        mark("final_norm", "lm.model.norm")
        output.register_hook(lambda grad: mark("final_norm_grad", "lm.model.norm"))

    norm = decoder.lm.model.norm.register_forward_hook(final_norm)
    cls.pre_forward, cls.pre_backward, cls.post_backward = wrapped_pre_forward, pre_backward, post_backward
    try:
        yield mark
    finally:
        cls.pre_forward, cls.pre_backward, cls.post_backward = pre_forward, pre, post
        norm.remove()


def measure(layout: str, config: dict[str, Any], batch: int = 2, seq_len: int = 128, world_size: int = 2,
            reshard_root: bool = True, loss_inside: bool = False, chunks: int = CHUNKS) -> dict[str, Any]:
    """Live bytes of the second step at its start of backward and at each marker (see `_markers`), with the units
    and bytes gathered there; the peak of the output layer's backward (from the first pre-backward to the first
    block's)."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from builder.validate.hf_models import build_model, make_token_ids

    gc.collect()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    marks: list = []
    try:
        # Profiled from before the model is built, so live bytes are absolute (builder.validate.peak.CpuMeter).
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            decoder = _decoder(build_model(config, "float32"), loss_inside, chunks)
            _shard(decoder, layout, reshard_root)
            optimizer = torch.optim.AdamW(decoder.parameters(), lr=1e-3, foreach=False)
            token_ids = make_token_ids(batch, seq_len, config["vocab_size"])
            for step in range(2):
                measured = step == 1
                with _markers(marks, decoder) if measured else contextlib.nullcontext() as mark:
                    optimizer.zero_grad(set_to_none=True)
                    hooks = ((lambda: mark("loss_grad", "")), (lambda: mark("loss", "")),
                             (lambda index: mark("head_chunk", str(index)))) if measured else (None, None, None)
                    decoder.hooks = hooks
                    out = decoder(token_ids)
                    loss = out if loss_inside else _loss(out, token_ids, *hooks[:2])
                    del out
                    if measured:
                        with record_function(f"{MARK}start"):
                            pass
                    loss.backward()
                    del loss
                    if measured:
                        mark("step", "")
                    optimizer.step()
        events = prof.profiler.kineto_results.events()
    finally:
        dist.destroy_process_group()
    changes = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    times = [time for time, _ in changes]
    live = list(itertools.accumulate(amount for _, amount in changes))
    at = {e.name()[len(MARK):]: e.start_ns() for e in events if e.name().startswith(MARK)}

    def live_at(time: int) -> int:
        index = bisect.bisect_right(times, time)
        return live[index - 1] if index else 0

    def peak(start: int, end: int) -> int:
        first, last = bisect.bisect_left(times, start), bisect.bisect_right(times, end)
        return max([live_at(start), *live[first:last]])

    hooks = [{**mark, "live": live_at(at[str(i)])} for i, mark in enumerate(marks)]
    last_layer = f"lm.model.layers.{config['num_hidden_layers'] - 1}"
    first = next(i for i, mark in enumerate(marks) if mark["hook"] == "pre")
    head_end = next(i for i, mark in enumerate(marks) if mark["hook"] == "pre" and mark["unit"] == last_layer)
    return {"layout": layout, "start_of_backward": live_at(at["start"]), "hooks": hooks,
            "head_backward_peak": peak(at[str(first)], at[str(head_end)]), "moments": moments(marks, last_layer)}


def moments(marks: list, last_layer: str) -> dict[str, int]:
    """The bytes FSDP2 holds gathered at the model's moments of a step (builder.model.step.PHASES), read off the
    markers: inside the last layer's forward (after its pre-forward), the output layer's forward (after the first
    pre-forward of its unit after the final norm's forward when it is a unit of its own, else after the final norm, in
    the root's forward), the end of forward (the loss computed), the start of backward before the first pre-backward
    and after the root unit's (a hook on the logits, or the loss where the model's forward computes it; where the root
    holds parameters), the loss gradients (the largest as each chunk's cross-entropy input gets its gradient: the
    model's start of backward), the output layer's backward (with a unit of its own and more than one chunk, the
    largest as each chunk's logits get their gradient but the last chunk to run, which prefetches the last block as
    one chunk's weight gradient is added to the sum, not the two the model's moment counts; else after the root's
    pre-backward), the final norm's backward (as its output gets its gradient), the last and first layers' backward
    (after their pre-backward), the end of backward (the first post-backward of the final callback, after the first
    layer's) and the optimizer step. A moment the markers cannot show (no root unit, one chunk) is left out."""
    def total(mark: dict) -> int:
        return sum(mark["bytes"][where] for where in GATHERED)

    def find(hook: str, unit: str) -> dict | None:
        return next((mark for mark in marks if mark["hook"] == hook and mark["unit"] == unit), None)

    def own_output(mark: dict) -> bool:  # the output layer's unit: lm_head alone, or with the final norm
        return mark["unit"].endswith("lm.lm_head")

    block = last_layer.rsplit(".", 1)[0]
    normed = marks.index(find("final_norm", "lm.model.norm"))
    heads = [mark for mark in marks[normed:] if mark["hook"] == "pre_forward" and own_output(mark)]
    chunks = [mark for mark in marks if mark["hook"] == "head_chunk"]
    first_post = marks.index(find("post", f"{block}.0"))
    root = find("pre_done", "root")
    got = {"layer_forward": total(find("pre_forward", last_layer)),
           "head_forward": total(heads[0] if heads else marks[normed]),
           "forward": total(find("loss", "")),
           "backward_start": max(total(mark) for mark in marks if mark["hook"] == "loss_grad"),
           "before_first_pre_backward": total(next(mark for mark in marks if mark["hook"] == "pre")),
           "final_norm_backward": total(find("final_norm_grad", "lm.model.norm")),
           "layer_backward": total(find("pre_done", last_layer)),
           "first_layer_backward": total(find("pre_done", f"{block}.0")),
           "backward_end": total(next(mark for mark in marks[first_post + 1:] if mark["hook"] == "post")),
           "optimizer_step": total(find("step", ""))}
    if root is not None:
        got["after_roots_pre_backward"] = total(root)
    if heads and len(chunks) > 1:
        got["head_backward"] = max(map(total, chunks[:-1]))
    elif not heads and root is not None:
        got["head_backward"] = total(root)
    return got
