"""Peak memory by phase of a training step: what is live when.

`estimate` sums every part (weights, gradients, optimizer states, all saved activations,
the logits). No moment of a real step holds exactly that: saved activations are freed
during backward while gradients appear, and some tensors live only for an instant (the
fp32 upcast of the logits, the loss gradients, the optimizer's temporaries). `phases`
lists the candidate peaks of one step, each as the parts live at that moment; `peak` is
the largest. builder/validate/peak.py measures the same moments (allocator events on CPU,
torch.cuda.max_memory_allocated on a GPU) and the Validation page compares them.

The training loop assumed is the usual one: `optimizer.zero_grad(set_to_none=True)`, a
forward that keeps only the loss (as transformers' Trainer does), `loss.backward()`,
`optimizer.step()`. With gradient accumulation the gradients stay allocated across
micro-batches, so they are live in the forward too.

Simplifications, named: within backward, live memory moves linearly from the start (all
saved activations, no gradients) to the end (all gradients, no saved activations) because
the layers are alike, so only the two ends are candidates; a layer's own backward
temporaries are left out except the recomputed layer under full recomputation. The
optimizer temporaries follow torch.optim's foreach implementation (the CUDA default);
fused kernels (fused=True, Apex, DeepSpeed) have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from builder.model.breakdown import Breakdown, Part, whole_bytes
from builder.model.config import Config
from builder.model.estimator import _per_token_rule as per_token_rule
from builder.model.estimator import estimate
from builder.model.units import dtype_bytes

LOSS = ("transformers 5.23 loss_utils.ForCausalLMLoss (logits.float()) and PyTorch 2.13 log_softmax / nll_loss "
        "backward; measured: content/validation/peak.json")
FOREACH = ("PyTorch 2.13 torch/optim/adam.py _multi_tensor_adam: exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), "
           "one state-sized temporary; measured: content/validation/peak.json")
TIED = ("PyTorch 2.13 autograd: the embedding's dense gradient and its sum with the head's gradient of the shared "
        "matrix; measured: content/validation/peak.json")
ACCUMULATE = "PyTorch autograd AccumulateGrad: .grad persists across micro-batches until zero_grad"
PHASES = ("forward", "backward_start", "backward_end", "optimizer_step")
PHASE_TITLES = {"forward": "end of forward (loss computed)", "backward_start": "start of backward (loss gradients)",
                "backward_end": "end of backward (all gradients)", "optimizer_step": "optimizer step"}
# Optimizers whose foreach step allocates a temporary the size of the named state part.
STEP_TEMPORARIES = {"adam": "optimizer/adam_v", "adamw": "optimizer/adam_v"}
NO_TEMPORARIES = ("sgd", "sgd-momentum")  # foreach SGD updates in place (no weight decay)


@dataclass(frozen=True)
class Phase:
    """One moment of a training step: the parts live then."""

    name: str  # one of PHASES
    parts: tuple[Part, ...]

    @property
    def total(self) -> int:
        """Bytes live at this moment."""
        return sum(p.bytes for p in self.parts)

    @property
    def title(self) -> str:
        """The moment in words."""
        return PHASE_TITLES[self.name]


def _transient(name: str, amount: Fraction | int, formula: str, source: str, note: str = "", per_unit: str = "") -> Part:
    return Part(name, whole_bytes(amount), formula, source, per_unit, note, transient=True)


def pick(by_name: dict[str, Part], name: str) -> list[Part]:
    """[the part called `name`], or [] when the estimate has none."""
    return [by_name[name]] if name in by_name else []


def phases(config: Config, breakdown: Breakdown | None = None) -> tuple[Phase, ...]:
    """The candidate peaks of one training step on the GPU `estimate` reports (training only)."""
    if config.mode != "train":
        raise ValueError("mode: phases of a step are for training; serving has one steady state")
    breakdown = breakdown or estimate(config)
    policy, arch = config.policy, config.model
    parts = breakdown.parts
    by_name = {p.name: p for p in parts}
    resident = [p for p in parts if p.bucket in ("weights", "master", "optimizer", "overhead")]
    grads = [p for p in parts if p.bucket == "gradients"]
    gathered, reducing = pick(by_name, "comm/gathered_params"), pick(by_name, "comm/unsharded_grads")
    saved = [p for p in parts if p.bucket == "activations" and not p.transient]
    logits = pick(by_name, "activations/logits")
    working = pick(by_name, "activations/recompute_working_layer")
    accumulating = grads if config.grad_accum > 1 else []
    accumulating = [Part(p.name, p.bytes, p.formula, ACCUMULATE, p.per_unit, "held across micro-batches")
                    for p in accumulating]

    loss_forward: list[Part] = []
    loss_backward: list[Part] = []
    if logits:
        act = dtype_bytes(policy.activation)
        fp32_logits = Fraction(logits[0].bytes) * 4 / act  # b x s x V / t in fp32
        tokens = config.micro_batch * (config.seq_len // config.cp)
        if policy.activation != "fp32":
            loss_forward.append(_transient("activations/logits_fp32", fp32_logits, "b x s x V x 4 B",
                                           LOSS, "the loss upcasts the logits to fp32",
                                           per_token_rule(fp32_logits, tokens)))
        if policy.autocast and arch is not None:
            # The model output keeps the final hidden state, fp32 under autocast; lm_head saved a cast copy.
            hidden = tokens * arch.hidden * 4
            loss_forward.append(_transient("activations/final_hidden_fp32", hidden, "b x s x h x 4 B", LOSS,
                                           "the final norm's fp32 output, held by the model output until the "
                                           "loss is computed", per_token_rule(Fraction(hidden), tokens)))
        loss_backward.append(_transient("activations/loss_grads", 2 * fp32_logits, "2 x b x s x V x 4 B", LOSS,
                                        "gradient of the log-probabilities and of the fp32 logits",
                                        per_token_rule(2 * fp32_logits, tokens)))

    tied: list[Part] = []
    if arch is not None and arch.tied_embeddings and logits and "activations/embedding" in by_name:
        if not config.lora_rank:
            rows = -(-arch.vocab // config.tp)
            tied.append(_transient("gradients/tied_embedding_temporaries", 2 * rows * arch.hidden *
                                   dtype_bytes(policy.grad), "2 x V/t x h x bytes(grad)", TIED,
                                   "unsharded: the sum is formed before any reduce-scatter", "2 V x h gradients"))

    temporaries: list[Part] = []
    state = by_name.get(STEP_TEMPORARIES.get(config.optimizer, ""))  # absent when offloaded: the host steps
    if state is not None:
        temporaries.append(_transient("optimizer/step_temporaries", state.bytes, "one second-moment-sized tensor",
                                      FOREACH, "torch.optim foreach; fused optimizers have none", state.per_unit))

    return (
        Phase("forward", tuple(resident + accumulating + gathered + saved + logits + loss_forward)),
        Phase("backward_start", tuple(resident + accumulating + gathered + reducing + saved + loss_backward)),
        Phase("backward_end", tuple(resident + grads + gathered + reducing + working + tied)),
        Phase("optimizer_step", tuple(resident + grads + temporaries)),
    )


def largest(steps: tuple[Phase, ...]) -> Phase:
    """The phase with the most bytes live (the first such, in step order)."""
    return max(steps, key=lambda phase: (phase.total, -PHASES.index(phase.name)))


def peak(config: Config, breakdown: Breakdown | None = None) -> Phase:
    """The largest of `phases(config, breakdown)`."""
    return largest(phases(config, breakdown))


def unmodelled(config: Config) -> tuple[str, ...]:
    """What the phases leave out for this configuration, in words."""
    notes = ["a layer's own backward temporaries (except the recomputed layer under full recomputation)"]
    if config.optimizer not in STEP_TEMPORARIES and config.optimizer not in NO_TEMPORARIES:
        notes.append(f"the {config.optimizer} step's temporaries")
    if config.implementation == "megatron" or config.activation_formula == "korthikanti":
        notes.append("Megatron's fused vocab-parallel cross entropy (the loss gradients follow transformers)")
    return tuple(notes)
