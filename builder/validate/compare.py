"""Predicted (builder.model.estimate) vs measured, case by case, with fixed tolerances.

Tolerances (issue 5; the model is fixed when a case misses, never the tolerance):
model states byte-exact; per-layer activations within 2%; the non-layer part
(embeddings, final norm, logits, loss) within 5%. A case the model cannot predict yet is
'unsupported', which counts as a failure in strict mode.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from builder.model.peak import PHASES
from builder.validate.cases import DTYPES

TOLERANCES = {"per_layer": 0.02, "rest": 0.05, "moe_block": 0.0, "whole_model": 0.02, "weights": 0.0, "gradients": 0.0, "optimizer": 0.0,
              "peak_forward": 0.03, "peak_backward": 0.03, "peak_optimizer_step": 0.03}
PEAK_QUANTITIES = ("peak_forward", "peak_backward", "peak_optimizer_step")
FAILING = ("fail", "unsupported")


@dataclass(frozen=True)
class Row:
    """One compared quantity of one case."""

    file: str
    case: str
    quantity: str  # 'per_layer', 'rest', 'weights', 'gradients', 'optimizer'
    measured: int
    predicted: int | None
    tolerance: float
    status: str  # 'ok', 'fail' or 'unsupported'
    note: str = ""

    @property
    def relative_error(self) -> float | None:
        """(predicted - measured) / measured; None when there is no prediction."""
        if self.predicted is None:
            return None
        if self.measured == 0:
            return 0.0 if self.predicted == 0 else float("inf")
        return (self.predicted - self.measured) / self.measured

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with the relative error."""
        data = asdict(self)
        data["relative_error"] = self.relative_error
        return data


def judge(file: str, case: str, quantity: str, measured: int, predicted: int | None, note: str = "") -> Row:
    """A Row with its status under the quantity's tolerance."""
    tolerance = TOLERANCES[quantity]
    if predicted is None:
        return Row(file, case, quantity, measured, None, tolerance, "unsupported", note)
    error = abs(predicted - measured) / measured if measured else float(predicted != 0)
    return Row(file, case, quantity, measured, predicted, tolerance, "ok" if error <= tolerance else "fail", note)


def architecture_for(hf_config: dict[str, Any], layers: int, name: str):
    """builder.model Architecture of the measured model with `layers` blocks."""
    from builder.model import from_hf_config

    config = dict(hf_config)
    config["n_layer" if config["model_type"] == "gpt2" else "num_hidden_layers"] = layers
    return from_hf_config(config, name=name)


def precision_of(inputs: dict[str, Any]) -> str:
    """The builder.model precision policy a measured case ran: 'fp32', 'bf16', or under autocast 'amp-bf16' (an fp32
    model) or 'bf16-autocast' (a bf16 model)."""
    if inputs.get("autocast"):
        return "amp-bf16" if inputs["dtype"] == "float32" else "bf16-autocast"
    return DTYPES[inputs["dtype"]]


def lora_of(inputs: dict[str, Any]) -> dict[str, Any]:
    """Config's LoRA fields for a measured case ({} without adapters)."""
    if not inputs.get("lora_rank"):
        return {}
    return {"lora_rank": inputs["lora_rank"], "lora_targets": tuple(inputs["lora_targets"])}


def predicted_activations(inputs: dict[str, Any], hf_config: dict[str, Any], layers: int, name: str) -> int:
    """Activation bytes the model predicts for the measured case with `layers` blocks."""
    from builder.model import Config
    from builder.model.estimator import saved_activations

    config = Config(model=architecture_for(hf_config, layers, name), mode="train", precision=precision_of(inputs),
                    micro_batch=inputs["batch"], seq_len=inputs["seq_len"], attention=inputs["attention"],
                    recompute=inputs["recompute"], dropout=inputs["dropout"], compile=inputs.get("compile", False),
                    padded=inputs.get("padded", False))
    amount = saved_activations(config)
    if amount is None:
        raise NotImplementedError("the estimate has no 'activations' part")
    return amount


def compare_activation_case(file: str, case: dict[str, Any]) -> list[Row]:
    """Per-layer and rest rows for one activation (or large-shape) case."""
    measured_layer = case["per_layer"]["activation_storage_bytes"]
    # The token ids belong to the caller but are saved by the embedding's backward: the model counts them.
    measured_rest = case["rest"]["activation_storage_bytes"] + case["rest"].get("input_bytes", 0)
    try:
        one = predicted_activations(case["inputs"], case["hf_config"], 1, case["name"])
        two = predicted_activations(case["inputs"], case["hf_config"], 2, case["name"])
    except Exception as error:  # the model may not support this yet: say so, never crash
        note = f"{type(error).__name__}: {error}"
        return [judge(file, case["name"], "per_layer", measured_layer, None, note),
                judge(file, case["name"], "rest", measured_rest, None, note)]
    per_layer = two - one
    return [judge(file, case["name"], "per_layer", measured_layer, per_layer),
            judge(file, case["name"], "rest", measured_rest, one - per_layer)]


def predicted_moe_block(inputs: dict[str, Any], hf_config: dict[str, Any], name: str) -> int:
    """What the one-layer model's MoE block saves, as the model predicts it: its 'mlp' and 'router' groups
    (builder.model.oplists._HF_MOE and the norm output its router reads)."""
    from builder.model import Config, estimate

    # One MoE layer (a case with DeepSeek's first dense layers measures its first MoE block).
    config = Config(model=architecture_for({**hf_config, "first_k_dense_replace": 0}, 1, name), mode="train",
                    precision=precision_of(inputs), micro_batch=inputs["batch"], seq_len=inputs["seq_len"],
                    attention=inputs["attention"], recompute=inputs["recompute"], dropout=inputs["dropout"])
    breakdown = estimate(config)
    return breakdown.get("activations/mlp") + breakdown.get("activations/router")


def compare_moe_case(file: str, case: dict[str, Any]) -> list[Row]:
    """An MoE case: its MoE block, byte-exact (the tensors the loss's graph still holds), the whole layer and the
    rest. The whole layer is compared as the loss's graph holds it too: less what the MoE block saves on branches
    that die with the forward (DeepSeek's group selection, saved_bytes - kept_bytes)."""
    block = case["moe_block"]
    measured = block["kept_bytes"]
    try:
        predicted = predicted_moe_block(case["inputs"], case["hf_config"], case["name"])
    except Exception as error:
        return [judge(file, case["name"], "moe_block", measured, None, f"{type(error).__name__}: {error}")]
    unkept = block["saved_bytes"] - block["kept_bytes"]
    if case["inputs"].get("first_dense"):
        # DeepSeek's first dense layers: the one-layer model is dense, so the whole two-layer model (a dense layer and
        # an MoE layer) is compared, with the token ids the embedding's backward saves.
        whole = case["two_layers"]["activation_storage_bytes"] + case["two_layers"]["input_bytes"] - unkept
        try:
            two = predicted_activations(case["inputs"], case["hf_config"], 2, case["name"])
        except Exception as error:
            return [judge(file, case["name"], "moe_block", measured, predicted),
                    judge(file, case["name"], "whole_model", whole, None, f"{type(error).__name__}: {error}")]
        return [judge(file, case["name"], "moe_block", measured, predicted),
                judge(file, case["name"], "whole_model", whole, two)]
    held = case["per_layer"]["activation_storage_bytes"] - unkept
    return [judge(file, case["name"], "moe_block", measured, predicted),
            *compare_activation_case(file, {**case, "per_layer": {**case["per_layer"],
                                                                   "activation_storage_bytes": held}})]


def predicted_states(inputs: dict[str, Any], hf_config: dict[str, Any], name: str, **parallel: Any) -> dict[str, int]:
    """weights / gradients / optimizer bytes the model predicts (master copy counted in weights)."""
    from builder.model import Config, estimate
    from builder.validate.states import STEP_SHAPE

    batch, tokens = STEP_SHAPE  # the measured step's (states do not depend on it)
    config = Config(model=architecture_for(hf_config, inputs["layers"], name), mode="train",
                    precision=precision_of(inputs), optimizer=inputs["optimizer"], micro_batch=batch, seq_len=tokens,
                    **lora_of(inputs), **parallel)
    breakdown = estimate(config, words=False)
    return {
        "weights": breakdown.get("weights") + breakdown.get("master"),
        "gradients": breakdown.get("gradients"),
        "optimizer": breakdown.get("optimizer"),
    }


def compare_state_case(file: str, case: dict[str, Any], **parallel: Any) -> list[Row]:
    """weights, gradients and optimizer rows for one model-state (or sharding) case."""
    measured = case["measured"]
    values = {"weights": measured["parameter_bytes"], "gradients": measured["gradient_bytes"],
              "optimizer": measured["optimizer_state_total_bytes"]}
    try:
        predicted = predicted_states(case["inputs"], case["hf_config"], case["name"], **parallel)
    except Exception as error:
        note = f"{type(error).__name__}: {error}"
        return [judge(file, case["name"], quantity, value, None, note) for quantity, value in values.items()]
    return [judge(file, case["name"], quantity, value, predicted[quantity]) for quantity, value in values.items()]


# Every candidate moment of the forward pass and of the backward pass, in step order (peak.PHASES up to the loss, and
# from the start of backward to its end).
FORWARD_PHASES = PHASES[:PHASES.index("forward") + 1]
BACKWARD_PHASES = PHASES[PHASES.index("backward_start"):PHASES.index("backward_end") + 1]


def peak_config(inputs: dict[str, Any], hf_config: dict[str, Any], name: str, **changes: Any):
    """The builder.model Config of a measured peak case (its inputs and config.json; `changes`: Config options the
    measurement set apart from its case)."""
    from builder.model import Config

    return Config(model=architecture_for(hf_config, inputs["layers"], name), mode="train", **lora_of(inputs),
                  precision=precision_of(inputs), optimizer=inputs["optimizer"], micro_batch=inputs["batch"],
                  seq_len=inputs["seq_len"], attention=inputs["attention"], recompute=inputs["recompute"],
                  dropout=inputs["dropout"], grad_accum=inputs["grad_accum"],
                  optimizer_impl=inputs.get("optimizer_impl", "foreach"), loss=inputs.get("loss", "eager"), **changes)


def predicted_peaks(inputs: dict[str, Any], hf_config: dict[str, Any], name: str, **changes: Any) -> dict[str, int]:
    """Bytes live at the peak of each measured phase, as builder.model.peak predicts them (`changes`: Config options
    the measurement set apart from its case, as builder.validate.float8's conversion).

    Forward's peak is the largest of its end and the moments inside it (the last layer's, the output layer's);
    backward's is the largest of its two ends and the moments inside it (builder.model.peak.PHASES)."""
    from builder.model import estimate
    from builder.model.peak import phases

    config = peak_config(inputs, hf_config, name, **changes)
    breakdown = estimate(config, words=False)
    totals = {phase.name: phase.total for phase in phases(config, breakdown)}
    # With the step inside backward, optimizer.step() has nothing left to do: the weights and states are live.
    after = breakdown.get("weights") + breakdown.get("optimizer")
    return {"peak_forward": max(totals[name] for name in FORWARD_PHASES if name in totals),
            "peak_backward": max(totals[name] for name in BACKWARD_PHASES if name in totals),
            "peak_optimizer_step": totals.get("optimizer_step", after)}


def compare_peak_case(file: str, case: dict[str, Any]) -> list[Row]:
    """One row per measured phase: peak live bytes, measured vs predicted."""
    measured = case["measured"]
    note = f"measured on {case.get('device', 'cpu')}"
    try:
        predicted = predicted_peaks(case["inputs"], case["hf_config"], case["name"])
    except Exception as error:
        return [judge(file, case["name"], quantity, measured[quantity], None, f"{type(error).__name__}: {error}")
                for quantity in PEAK_QUANTITIES]
    return [judge(file, case["name"], quantity, measured[quantity], predicted[quantity], note)
            for quantity in PEAK_QUANTITIES]


def compare_documents(documents: dict[str, dict[str, Any]]) -> list[Row]:
    """Every comparable quantity of every measured case."""
    rows: list[Row] = []
    for file in sorted(documents):
        data = documents[file]
        kind = data.get("kind")
        for case in data.get("cases", []):
            if kind in ("activations", "large_shapes", "compiled"):
                rows += compare_activation_case(file, case)
            elif kind == "moe":
                rows += compare_moe_case(file, case)
            elif kind == "model_states":
                rows += compare_state_case(file, case)
            elif kind == "peak":
                rows += compare_peak_case(file, case)
            elif kind == "sharding" and case["inputs"]["rank"] == 0:  # rank 0 holds the padded maximum
                rows += compare_state_case(file, case, dp=case["inputs"]["world_size"], fsdp="FULL_SHARD")
    return rows


def summarise(rows: list[Row]) -> dict[str, int]:
    """Counts of rows by status."""
    counts = {"ok": 0, "fail": 0, "unsupported": 0}
    for row in rows:
        counts[row.status] += 1
    return counts


def format_rows(rows: list[Row]) -> str:
    """A plain-text table, failures first."""
    order = {"unsupported": 1, "fail": 0, "ok": 2}
    lines = []
    for row in sorted(rows, key=lambda r: (order[r.status], r.file, r.case, r.quantity)):
        error = "" if row.relative_error is None else f"{row.relative_error:+.2%}"
        predicted = "-" if row.predicted is None else str(row.predicted)
        lines.append(f"{row.status:11} {row.quantity:19} {row.measured:>12} {predicted:>12} {error:>9}  "
                     f"{row.case}{'  (' + row.note + ')' if row.note else ''}")
    counts = summarise(rows)
    lines.append(f"{counts['ok']} ok, {counts['fail']} outside tolerance, {counts['unsupported']} unsupported")
    return "\n".join(lines)
