"""Peak memory by phase of a training step: what is live when.

`estimate` sums every part (weights, gradients, optimizer states, all saved activations,
the logits). No moment of a real step holds exactly that: saved activations are freed
during backward while gradients appear, and some tensors live only for an instant (the
fp32 upcast of the logits, the loss gradients, the optimizer's temporaries). `phases`
lists the candidate peaks of one step, each as the parts live at that moment (the table
LIVE) plus the tensors of that moment alone (the rows TRANSIENTS); `peak` is the largest.
`need` is what every verdict compares with capacity: the largest moment over every pipeline
stage, reserved parts included (serving: the steady state). builder/validate/peak.py
measures the same moments (allocator events on CPU, torch.cuda.max_memory_allocated on a
GPU) and the Validation page compares them. LIVE and TRANSIENTS are data: the calculator's
script evaluates the same rows (builder/widgets/calculator.py sends them).

The training loop assumed is the usual one: `optimizer.zero_grad(set_to_none=True)`, a
forward that keeps only the loss (as transformers' Trainer does), `loss.backward()`,
`optimizer.step()`. With gradient accumulation the gradients stay allocated across
micro-batches, so they are live in the forward too.

Inside a layer (oplists.MOMENTS): the instants when a layer's own forward or backward
temporaries peak (eager attention's softmax and its backward, the causal-mask add under
autocast, the MLP product's backward), in the last layer (all saved activations still live,
few gradients) and, for the backward, in the first layer (all gradients but that layer's
unmade ones, few activations left). Simplifications, named: live memory moves evenly from
the last layer to the first (the layers are alike), so only those two ends are candidates;
like the end of backward, the first layer's moment leaves out the saved activations of other
micro-batches a pipeline stage still holds; a mixture-of-experts layer's expert gradients
count every expert (expert parallelism holds E / ep of them).
The optimizer temporaries follow torch.optim's foreach implementation (the CUDA default);
fused kernels (fused=True, Apex, DeepSpeed) have none. What is left out is in `unmodelled`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from builder.model import oplists
from builder.model.activations import LayerMoment, layer_moments, per_token_text
from builder.model.breakdown import Breakdown, Part, join_parts, whole_bytes
from builder.model.config import Config
from builder.model.estimator import breakdown_of, estimate, overhead_parts, stage_estimates
from builder.model.units import dtype_bytes

LOSS = ("transformers 5.23 loss_utils.ForCausalLMLoss (logits.float()) and PyTorch 2.13 log_softmax / nll_loss "
        "backward; measured: content/validation/peak.json")
FOREACH = ("PyTorch 2.13 torch/optim/adam.py _multi_tensor_adam: exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), "
           "one state-sized temporary; measured: content/validation/peak.json")
TIED = ("PyTorch 2.13 autograd: the embedding's dense gradient and its sum with the head's gradient of the shared "
        "matrix; measured: content/validation/peak.json")
ACCUMULATE = "PyTorch autograd AccumulateGrad: .grad persists across micro-batches until zero_grad"
AUTOGRAD = ("PyTorch 2.13 autograd (torch/csrc/autograd/engine.cpp: a node's saved tensors are freed once it has run; "
            "derivatives from tools/autograd/derivatives.yaml); measured: content/validation/peak.json")
PHASES = ("layer_forward", "forward", "backward_start", "layer_backward", "first_layer_backward", "backward_end",
          "optimizer_step")
PHASE_TITLES = {"layer_forward": "forward through the last layer", "forward": "end of forward (loss computed)",
                "backward_start": "start of backward (loss gradients)",
                "layer_backward": "backward through the last layer",
                "first_layer_backward": "backward through the first layer",
                "backward_end": "end of backward (all gradients)",
                "optimizer_step": "optimizer step"}
ADAFACTOR_STEP = ("PyTorch 2.13 torch/optim/_adafactor.py _multi_tensor_adafactor: var_estimates = row_var @ col_var, "
                  "one gradient-sized tensor per matrix (its docstring: foreach uses ~ sizeof(params) more peak "
                  "memory); measured: content/validation/peak.json")
# The TRANSIENTS condition each optimizer's foreach step meets (none: it updates in place).
STEP_FLAGS = {"adam": "foreach_adam", "adamw": "foreach_adam", "adafactor": "foreach_adafactor"}
STEP_TEMPORARIES = tuple(STEP_FLAGS)
NO_TEMPORARIES = ("sgd", "sgd-momentum")  # foreach SGD updates in place (no weight decay)


@dataclass(frozen=True)
class Phase:
    """One moment of a training step: the parts live then."""

    name: str  # one of PHASES
    parts: tuple[Part, ...]
    detail: str = ""  # inside a layer: the instant (an oplists.Moment's op)

    @property
    def total(self) -> int:
        """Bytes live at this moment."""
        return sum(p.bytes for p in self.parts)

    @property
    def title(self) -> str:
        """The moment in words."""
        return PHASE_TITLES[self.name]


# The estimate's parts that are live at the peak but not saved for backward (Part.transient): the
# returned logits and the layer recomputed under full recomputation. 'saved' below leaves them out.
NOT_SAVED = ("activations/logits", "activations/recompute_working_layer")

# Which parts are live at each moment of the step, as selectors of the estimate's parts: a bucket
# ('weights'), a part's name ('activations/logits'), 'saved' (the saved activations: the activations
# bucket less its transient parts) or 'accumulating' (the gradients, when gradient accumulation
# keeps them across micro-batches). Python (phases_of) and the calculator's script read this table.
_IN_BACKWARD = ("weights", "optimizer", "accumulating", "comm/gathered_params", "comm/unsharded_grads", "saved")
LIVE = {
    "layer_forward": ("weights", "optimizer", "accumulating", "comm/gathered_params", "saved"),
    "forward": ("weights", "optimizer", "accumulating", "comm/gathered_params", "saved", "activations/logits"),
    "backward_start": _IN_BACKWARD,
    "layer_backward": _IN_BACKWARD,
    # Inside the first layer's backward: every gradient (less what that layer has not made yet), and of the
    # saved tensors only the embedding's and the first layer's own (added per moment).
    "first_layer_backward": ("weights", "optimizer", "gradients", "comm/gathered_params", "comm/unsharded_grads",
                             "activations/embedding"),
    "backward_end": ("weights", "optimizer", "gradients", "comm/gathered_params", "comm/unsharded_grads",
                     "activations/recompute_working_layer"),
    "optimizer_step": ("weights", "optimizer", "gradients"),
}


@dataclass(frozen=True)
class Transient:
    """A tensor that lives for one moment of the step only, as a product of factors, when all conditions hold.

    Factors are numbers, symbols of `transient_symbols` (T tokens on this GPU, V vocabulary rows on this
    GPU, h hidden size, grad: bytes per gradient element) or the name of a part (its bytes). Conditions
    are flags of `transient_flags`. The calculator's script evaluates the same rows."""

    name: str
    phase: str
    factors: tuple[int | str, ...]
    conditions: tuple[str, ...]
    formula: str
    source: str
    note: str
    per_token: bool = True  # annotate bytes per token (else `per_unit` below)
    per_unit: str = ""


TRANSIENTS = (
    Transient("activations/logits_fp32", "forward", ("T", "V", 4), ("head", "low_precision"), "b x s x V x 4 B",
              LOSS, "the loss upcasts the logits to fp32"),
    Transient("activations/final_hidden_fp32", "forward", ("T", "h", 4), ("head", "autocast"), "b x s x h x 4 B",
              LOSS, "the final norm's fp32 output, held by the model output until the loss is computed"),
    Transient("activations/loss_grads", "backward_start", (2, "T", "V", 4), ("head",), "2 x b x s x V x 4 B",
              LOSS, "gradient of the log-probabilities and of the fp32 logits"),
    Transient("gradients/tied_embedding_temporaries", "backward_end", (2, "V", "h", "grad"),
              ("head", "embedding", "tied", "full_tuning"), "2 x V/t x h x bytes(grad)", TIED,
              "unsharded: the sum is formed before any reduce-scatter", False, "2 V x h gradients"),
    Transient("optimizer/step_temporaries", "optimizer_step", ("optimizer/adam_v",), ("foreach_adam",),
              "one second-moment-sized tensor", FOREACH, "torch.optim foreach; fused optimizers have none", False,
              "as the second moment"),
    Transient("optimizer/step_temporaries", "optimizer_step", ("gradients",), ("foreach_adafactor",),
              "one gradient-sized tensor", ADAFACTOR_STEP, "the factored second moment expanded to each matrix's shape",
              False, "as the gradients"),
)


def transient_symbols(config: Config) -> dict[str, Fraction]:
    """The symbols TRANSIENTS multiply: T tokens on this GPU, V vocabulary rows on this GPU, h, grad bytes."""
    arch = config.model
    return {"T": Fraction(config.micro_batch * (config.seq_len // config.cp)),
            "V": Fraction(-(-arch.vocab // config.tp)) if arch else Fraction(0),
            "h": Fraction(arch.hidden) if arch else Fraction(0), "grad": dtype_bytes(config.policy.grad)}


def transient_flags(config: Config, parts: tuple[Part, ...]) -> set[str]:
    """The conditions of TRANSIENTS that hold for this configuration on a GPU holding `parts`."""
    names, policy, arch = {p.name for p in parts}, config.policy, config.model
    flags = {"head" if "activations/logits" in names else "", "embedding" if "activations/embedding" in names else "",
             "low_precision" if policy.activation != "fp32" else "", "autocast" if policy.autocast else "",
             "tied" if arch is not None and arch.tied_embeddings else "",
             "full_tuning" if not config.lora_rank else "",
             STEP_FLAGS.get(config.optimizer, "")}
    return flags - {""}


def _live(selector: str, config: Config, parts: tuple[Part, ...]) -> list[Part]:
    """The parts a LIVE selector picks."""
    if selector == "saved":
        return [p for p in parts if p.bucket == "activations" and p.name not in NOT_SAVED]
    if selector == "accumulating":
        return [Part(p.name, p.bytes, p.formula, ACCUMULATE, p.per_unit, "held across micro-batches")
                for p in parts if p.bucket == "gradients" and config.grad_accum > 1]
    return [p for p in parts if p.name == selector or ("/" not in selector and p.bucket == selector)]


def _transients(phase: str, config: Config, parts: tuple[Part, ...]) -> list[Part]:
    """The TRANSIENTS of one moment whose conditions hold, worked out."""
    flags, values = transient_flags(config, parts), transient_symbols(config)
    by_name = {p.name: p.bytes for p in parts}
    out = []
    for row in TRANSIENTS:
        if row.phase != phase or not set(row.conditions) <= flags:
            continue
        amount = Fraction(1)
        for factor in row.factors:
            amount *= factor if isinstance(factor, int) else values.get(factor, by_name.get(factor, 0))
        rule = per_token_text(amount, values["T"]) if row.per_token else row.per_unit
        out.append(Part(row.name, whole_bytes(amount), row.formula, row.source, rule, row.note, transient=True))
    return out


def phases(config: Config, breakdown: Breakdown | None = None) -> tuple[Phase, ...]:
    """The candidate peaks of one training step on the GPU `estimate` reports (training only)."""
    if config.mode != "train":
        raise ValueError("mode: phases of a step are for training; serving has one steady state")
    return phases_of(config, (breakdown or estimate(config)).parts)


def phases_of(config: Config, parts: tuple[Part, ...]) -> tuple[Phase, ...]:
    """The candidate peaks of one training step on a GPU holding `parts` (one pipeline stage's): LIVE's
    parts and the moment's TRANSIENTS; inside a layer, the worst of its MOMENTS.

    The reserved parts (allocator reserve and framework percentage, which scale with what is
    allocated, and the fixed amounts) are worked out again for each moment, on top of what is
    live then: a 10% framework overhead is 10% of the peak, not of the sum of parts."""
    steps = []
    names = {p.name for p in parts}
    moments = layer_moments(config.model, config) \
        if config.model is not None and any(p.bucket == "activations" for p in parts) else []
    # Weight gradients are new tensors of this backward: not accumulated into, not an unsharded unit's.
    fresh = config.grad_accum == 1 and "comm/unsharded_grads" not in names
    head = "activations/logits" in names
    for name, selectors in LIVE.items():
        tensors = [p for selector in selectors for p in _live(selector, config, parts)]
        tensors += _transients(name, config, parts)
        detail = ""
        if name in MOMENT_PHASES:
            within = _first_layer if name == "first_layer_backward" else _last_layer
            candidates = [within(m, tensors, fresh, head) for m in moments if m.phase == MOMENT_PHASES[name]]
            if not candidates:
                continue
            detail, tensors = max(candidates, key=lambda c: sum(p.bytes for p in c[1]))
        steps.append(Phase(name, join_parts(tensors, overhead_parts(config, sum(p.bytes for p in tensors))), detail))
    return tuple(steps)


# The phases inside a layer, and the kind of oplists.Moment each one takes the worst of.
MOMENT_PHASES = {"layer_forward": "layer_forward", "layer_backward": "layer_backward",
                 "first_layer_backward": "layer_backward"}
# The output layer's saved tensors: not made yet inside the last layer's forward, freed before its backward.
HEAD_SAVED = tuple(dict.fromkeys(f"activations/{row.group}"
                                 for row in oplists.LAST_STAGE_LAYERNORM + oplists.LAST_STAGE_RMSNORM))


def _moment_part(name: str, amount: Fraction, formula: str, moment: LayerMoment) -> list[Part]:
    """One part of a moment inside a layer (none when zero)."""
    return [Part(name, whole_bytes(amount), formula, AUTOGRAD, "", f"at {moment.op}", transient=True)] if amount else []


def _last_layer(moment: LayerMoment, tensors: list[Part], fresh: bool, head: bool) -> tuple[str, list[Part]]:
    """The parts live at `moment` in the last layer: the output layer's saved tensors gone, the saved groups
    changed by what is live of the last layer then (recomputed rows added), its temporaries and, in the
    backward, the weight gradients made by then."""
    out, change = [], {g: moment.live.get(g, 0) - moment.kept.get(g, 0) for g in {*moment.live, *moment.kept}}
    for p in tensors:
        if p.name in HEAD_SAVED:
            continue
        group = p.name.removeprefix("activations/")
        if p.bucket == "activations" and group in change:
            p = Part(p.name, whole_bytes(p.bytes + change.pop(group)), p.formula, p.source, p.per_unit,
                     f"less what the last layer has not made or has freed at {moment.op}")
        out.append(p)
    made = moment.made + (moment.head_grads if head else 0) if fresh and moment.phase == "layer_backward" else 0
    return moment.op, out + [
        *_moment_part("activations/recomputed_in_last_layer", sum(change.values(), Fraction(0)),
                      "the recomputed layer's tensors made up to this moment", moment),
        *_moment_part("activations/layer_temporaries", moment.temporaries,
                      "the op's inputs' and outputs' gradients, or the scores it materialises", moment),
        *_moment_part("gradients/made_so_far", made,
                      "weight gradients of the output layer and of the last layer's later weights", moment)]


def _first_layer(moment: LayerMoment, tensors: list[Part], fresh: bool, head: bool) -> tuple[str, list[Part]]:
    """The parts live at `moment` in the first layer: every gradient but the first layer's not made yet,
    the embedding's saved tensors, the first layer's rows live then and its temporaries."""
    out = list(tensors)
    if fresh:
        unmade = moment.layer_grads - moment.made
        out = [Part(p.name, whole_bytes(max(0, p.bytes - unmade)), p.formula, p.source, p.per_unit,
                    f"less the first layer's weight gradients not made yet at {moment.op}")
               if p.name == "gradients" else p for p in out]
    return moment.op, out + [
        *_moment_part("activations/first_layer", sum(moment.live.values(), Fraction(0)),
                      "the first layer's saved tensors still live at this moment", moment),
        *_moment_part("activations/layer_temporaries", moment.temporaries,
                      "the op's inputs' and outputs' gradients", moment)]


def largest(steps: tuple[Phase, ...]) -> Phase:
    """The phase with the most bytes live (the first such, in step order)."""
    return max(steps, key=lambda phase: (phase.total, -PHASES.index(phase.name)))


def peak(config: Config, breakdown: Breakdown | None = None) -> Phase:
    """The largest of `phases(config, breakdown)`."""
    return largest(phases(config, breakdown))


@dataclass(frozen=True)
class Need:
    """What a run needs on its fullest GPU: the number every verdict compares with capacity.

    Training: the highest moment of a step (`largest` of `phases_of`) over every pipeline stage,
    reserved parts included. Serving: the steady state, which is the sum of parts."""

    bytes: int  # what "fits", "exceeds by", --max and the fits-on lists compare with capacity
    sum_of_parts: int  # the estimate's total (the fullest stage's parts added up), shown beside it
    peak: Phase | None  # training: the moment that sets the need; serving: None
    steps: tuple[Phase, ...] = ()  # training: every moment of the stage that sets the need
    stage: str = "only"  # the pipeline stage that sets the need

    @property
    def basis(self) -> str:
        """What the need is, in words: 'peak of a step, at the start of backward' or 'sum of parts'."""
        return f"peak of a step, at the {self.peak.title}" if self.peak else "sum of parts (serving steady state)"


def need(config: Config, evaluated: list | None = None) -> Need:
    """What `config` needs per GPU (see Need), from `stage_estimates(config)` when already at hand."""
    evaluated = evaluated if evaluated is not None else stage_estimates(config)
    total = max(sum(p.bytes for p in gpu) for _, gpu, _ in evaluated)
    if config.mode != "train":
        return Need(total, total, None)
    best: Need | None = None
    for stage, gpu, _ in evaluated:
        steps = phases_of(config, join_parts(gpu))
        top = largest(steps)
        if best is None or top.total > best.bytes:
            best = Need(top.total, total, top, steps, stage.name)
    assert best is not None
    return best


def assess(config: Config) -> tuple[Breakdown, Need]:
    """The estimate and the need of `config`, from one evaluation of its pipeline stages."""
    evaluated = stage_estimates(config)
    return breakdown_of(config, evaluated), need(config, evaluated)


def unmodelled(config: Config) -> tuple[str, ...]:
    """What the phases leave out for this configuration, in words."""
    notes = []
    if config.model is not None and config.model.is_moe:
        notes.append("the instants inside the expert MLPs' backward")
    if config.dropout and config.attention == "eager":
        notes.append("the attention dropout's own instant (the dropout mask and output exist; their instant is not "
                     "measured on a GPU yet)")
    if config.attention != "eager":
        notes.append("the fused attention kernel's backward workspace")
    if config.optimizer not in STEP_TEMPORARIES and config.optimizer not in NO_TEMPORARIES:
        notes.append(f"the {config.optimizer} step's temporaries")
    if config.implementation == "megatron" or config.activation_formula == "korthikanti":
        notes.append("Megatron's fused vocab-parallel cross entropy (the loss gradients follow transformers)")
    if config.activation_formula == "korthikanti":
        notes.append("a layer's own instants (the reference formulas have no op list)")
    return tuple(notes)
