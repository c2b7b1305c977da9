"""FSDP2's units at the output layer's backward, measured on CPU with a fake process group.

One process plays rank 0 of `world_size` (`dist.init_process_group('fake', ...)`: every collective returns correctly
shaped tensors and moves nothing), as builder.validate.sharding does. A small Llama (transformers' LlamaForCausalLM, fp32)
runs as torchtune's full fine-tuning recipe runs its decoder: the final hidden state cut into 8 chunks along the
sequence, the output layer called on each (torchtune/modules/transformer.py TransformerDecoder.chunked_output at
30b8519), each chunk's logits upcast and cross-entropied (CEWithChunkedOutputLoss). It is wrapped as
torchtune/training/_distributed.py shard_model wraps it (30b8519): fully_shard on every module whose name matches
(the layers and, for the 'custom' layout, torchtune's custom_sharded_layers tok_embeddings and output, here
transformers' embed_tokens and lm_head), from the last module up, then on the whole model, the root unit.

Two steps run (AdamW, for-loop); the second is measured: the CPU allocator's live bytes from torch.profiler's memory
events (builder.validate.peak.CpuMeter's meter) and, at each FSDP2 pre- and post-backward hook (FSDPParamGroup
.pre_backward and .post_backward, wrapped here for the measurement and restored after), a marker with the units
gathered then and the parameters whose unsharded gradient the post-backward finds.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import itertools
from typing import Any, Iterator

LAYOUTS = ("default", "custom")  # blocks + root; blocks + token embedding + output layer + root
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


def _decoder(lm):
    """torchtune's TransformerDecoder forward with output chunks, over a transformers causal LM: the decoder's last
    hidden state (after the final norm), the output layer on each of CHUNKS chunks along the sequence."""
    from torch import nn

    class ChunkedDecoder(nn.Module):
        def __init__(self, lm) -> None:
            super().__init__()
            self.lm = lm

        def forward(self, token_ids):
            hidden = self.lm.model(input_ids=token_ids).last_hidden_state
            return [self.lm.lm_head(chunk) for chunk in hidden.chunk(CHUNKS, dim=1)]

    return ChunkedDecoder(lm)


def _shard(decoder, layout: str) -> None:
    """torchtune's shard_model: fully_shard on each matching module from the last up, then on the root."""
    from torch.distributed.fsdp import fully_shard

    custom = ("lm.model.embed_tokens", "lm.lm_head") if layout == "custom" else ()
    for name, module in reversed(list(decoder.named_modules())):
        parts = name.split(".")
        if (len(parts) == 4 and parts[:3] == ["lm", "model", "layers"] and parts[3].isdigit()) or name in custom:
            fully_shard(module)
    fully_shard(decoder)


def _loss(logits: list, token_ids):
    """CEWithChunkedOutputLoss: labels shifted by one (the last ignored), each chunk upcast and summed."""
    import torch
    import torch.nn.functional as F

    ignore = torch.full((token_ids.shape[0], 1), -100, dtype=token_ids.dtype)
    labels = torch.hstack((token_ids[..., 1:], ignore))
    total = sum(F.cross_entropy(chunk.float().flatten(0, 1), target.flatten(), ignore_index=-100, reduction="sum")
                for chunk, target in zip(logits, labels.chunk(CHUNKS, dim=1)))
    return total / (labels != -100).sum()


@contextlib.contextmanager
def _markers(marks: list, decoder) -> Iterator[None]:
    """Wrap FSDPParamGroup.pre_backward and post_backward: each call leaves a profiler marker and a row in `marks`
    (the hook, its unit, the units gathered before it runs, the parameters with an unsharded gradient)."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard import _fsdp_param_group as groups
    from torch.profiler import record_function

    cls = groups.FSDPParamGroup
    pre, post = cls.pre_backward, cls.post_backward
    every = [group for module in decoder.modules() if isinstance(module, FSDPModule)
             for group in module._get_fsdp_state()._fsdp_param_groups]

    def gathered() -> tuple[str, ...]:
        # Unsharded, or all-gathered by a prefetch whose copy-out waits for the unit's own pre-backward.
        return tuple(sorted(g._module_fqn or "root" for g in every
                            if g.is_unsharded or g._all_gather_result is not None))

    def mark(hook: str, group, graded: tuple[str, ...] = ()) -> None:
        marks.append({"hook": hook, "unit": group._module_fqn or "root", "gathered": gathered(), "grads": graded})
        with record_function(f"{MARK}{len(marks) - 1}"):
            pass

    def pre_backward(self, *args: Any) -> Any:
        mark("pre", self)
        return pre(self, *args)

    def post_backward(self, *args: Any) -> Any:
        graded = tuple(p._param_fqn for p in self.fsdp_params
                       if hasattr(p, "_unsharded_param") and p.unsharded_param.grad is not None)
        mark("post", self, graded)
        return post(self, *args)

    cls.pre_backward, cls.post_backward = pre_backward, post_backward
    try:
        yield
    finally:
        cls.pre_backward, cls.post_backward = pre, post


def measure(layout: str, config: dict[str, Any], batch: int = 2, seq_len: int = 128, world_size: int = 2
            ) -> dict[str, Any]:
    """Live bytes of the second step at its start of backward and at each FSDP2 backward hook, with the units
    gathered there; the peak of the output layer's backward (from the first pre-backward to the first block's)."""
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
            decoder = _decoder(build_model(config, "float32"))
            _shard(decoder, layout)
            optimizer = torch.optim.AdamW(decoder.parameters(), lr=1e-3, foreach=False)
            token_ids = make_token_ids(batch, seq_len, config["vocab_size"])
            for step in range(2):
                measured = step == 1
                with _markers(marks, decoder) if measured else contextlib.nullcontext():
                    optimizer.zero_grad(set_to_none=True)
                    loss = _loss(decoder(token_ids), token_ids)
                    if measured:
                        with record_function(f"{MARK}start"):
                            pass
                    loss.backward()
                    del loss
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
    head_end = next(i for i, mark in enumerate(marks) if mark["hook"] == "pre" and mark["unit"] == last_layer)
    return {"layout": layout, "start_of_backward": live_at(at["start"]), "hooks": hooks,
            "head_backward_peak": peak(at["0"], at[str(head_end)])}
