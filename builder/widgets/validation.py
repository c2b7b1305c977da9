"""The validation report: predicted (the model, at build time) vs measured (committed data).

Measurements come from `python -m builder validate --write` (content/validation/*.json);
predictions are recomputed on every build by builder.validate.compare, which needs no
torch. Nothing here runs in the browser: the report is a server-rendered figure and table.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from builder.validate.compare import TOLERANCES, Row, compare_documents
from builder.validate.results import VALIDATION_DIR, read_json

QUANTITY_NAMES = {
    "per_layer": "activations per layer",
    "rest": "activations outside the layers",
    "moe_block": "activations of an MoE block",
    "whole_model": "activations of a whole two-layer model",
    "weights": "weights",
    "gradients": "gradients",
    "optimizer": "optimizer states",
    "peak_forward": "peak in the forward pass",
    "peak_backward": "peak in the backward pass",
    "peak_optimizer_step": "peak in the optimizer step",
}
MARKERS = {"per_layer": "circle", "rest": "square", "moe_block": "circle", "whole_model": "circle", "weights": "diamond", "gradients": "diamond",
           "optimizer": "diamond", "peak_forward": "triangle", "peak_backward": "triangle",
           "peak_optimizer_step": "triangle"}
MARKER_CLASS = {"per_layer": "tm-bucket-activations", "rest": "tm-bucket-gradients",
                "moe_block": "tm-bucket-activations", "whole_model": "tm-bucket-activations",
                "weights": "tm-bucket-weights",
                "gradients": "tm-bucket-weights", "optimizer": "tm-bucket-weights",
                "peak_forward": "tm-bucket-optimizer", "peak_backward": "tm-bucket-optimizer",
                "peak_optimizer_step": "tm-bucket-optimizer"}
LEGEND = {"per_layer": "activations per layer", "rest": "activations outside the layers",
          "weights": "model states", "peak_forward": "peak of a step, by phase"}
FILE_NAMES = {
    "activations.json": "Activations (transformers models on CPU)",
    "large_shapes.json": "Real 7B-70B layer shapes (FakeTensorMode, nothing allocated)",
    "compiled.json": "Layers under torch.compile (inductor, on CPU)",
    "moe.json": "Mixture-of-experts layers (transformers' MoE blocks, on CPU)",
    "model_states.json": "Model states after an optimizer step",
    "sharding.json": "FSDP2 sharding (fake process group)",
    "peak.json": "Peak of a real training step, by phase (CPU allocator)",
    "peak_gpu.json": "Peak of a real training step, by phase (GPU: torch.cuda.max_memory_allocated)",
}


def load_documents(folder: Path = VALIDATION_DIR) -> dict[str, dict]:
    """The committed result documents (not the per-op listings), by file name."""
    return {path.name: read_json(path) for path in sorted(folder.glob("*.json"))
            if not path.name.startswith("saved_tensors_")}


def context(options: dict[str, Any], catalogs: dict[str, Any], documents: dict[str, dict] | None = None
            ) -> dict[str, Any]:
    """Rows, summary, environment and the chart, for templates/partials/widget-validation.html."""
    if documents is None:  # the content folder's measurements (content/validation/ unless --content says otherwise)
        documents = load_documents(catalogs.get("validation_dir", VALIDATION_DIR))
    rows = compare_documents(documents)
    return {
        "summary": summarise(rows),
        "groups": [{"title": FILE_NAMES.get(name, name), "rows": [table_row(r) for r in rows if r.file == name]}
                   for name in documents if any(r.file == name for r in rows)],
        "outside": [table_row(r) for r in rows if r.status != "ok"],
        "environment": next(iter(documents.values()), {}).get("environment", {}),
        "svg": draw_scatter(rows),
        "data": {},
    }


def summarise(rows: list[Row]) -> dict[str, Any]:
    """Counts per quantity, the worst error and the tolerance of each."""
    quantities = []
    for quantity, name in QUANTITY_NAMES.items():
        mine = [r for r in rows if r.quantity == quantity]
        if not mine:
            continue
        errors = [abs(r.relative_error) for r in mine if r.relative_error is not None]
        quantities.append({
            "name": name, "cases": len(mine), "within": sum(r.status == "ok" for r in mine),
            "tolerance": "byte-exact" if TOLERANCES[quantity] == 0 else f"within {TOLERANCES[quantity]:.0%}",
            "worst": f"{max(errors):.2%}" if errors else "n/a",
        })
    return {"total": len(rows), "within": sum(r.status == "ok" for r in rows), "quantities": quantities}


def table_row(row: Row) -> dict[str, Any]:
    """One table line: the case, the quantity, both byte counts, the error and the verdict."""
    error = row.relative_error
    return {
        "case": row.case, "quantity": QUANTITY_NAMES[row.quantity], "measured": f"{row.measured:,}",
        "predicted": "n/a" if row.predicted is None else f"{row.predicted:,}",
        "error": "n/a" if error is None else f"{error:+.2%}",
        "tolerance": "0 B" if TOLERANCES[row.quantity] == 0 else f"±{TOLERANCES[row.quantity]:.0%}",
        "verdict": "within tolerance" if row.status == "ok" else ("no prediction" if row.predicted is None
                                                                  else "OUTSIDE tolerance"),
        "note": row.note,
    }


# --- the chart: plain SVG, deterministic, colours from static/charts.css classes -------------

# (width, height, left, bottom, top, right, legend below the plot): the wide chart keeps its legend beside the
# plot; the narrow one (a 320 px phone's column, scaled up, never down) puts it under. static/site.css shows one.
LAYOUTS = {"wide": (660, 420, 72, 52, 16, 236, False), "narrow": (288, 470, 72, 52, 16, 12, True)}
TEXT_SIZE = 12  # chart text is never smaller


def draw_scatter(rows: list[Row]) -> str:
    """The wide and the narrow chart, one after the other (ids differ)."""
    return "\n".join(draw_one_scatter(rows, name) for name in LAYOUTS) if any(r.predicted for r in rows) else ""


def draw_one_scatter(rows: list[Row], layout: str) -> str:
    """Predicted against measured bytes on log-log axes, one marker shape per quantity."""
    width, height, left, bottom, top, right, below = LAYOUTS[layout]
    points = [r for r in rows if r.predicted]
    values = [v for r in points for v in (r.measured, r.predicted) if v > 0]
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    plot_w = width - left - right
    plot_h = plot_w if below else height - top - bottom
    legend_top = top + plot_h + bottom if below else top + 10
    if below:
        height = legend_top + 18 * (len(LEGEND) + 2) + 8

    def x_of(value: float) -> float:
        return left + (math.log10(value) - low) / (high - low) * plot_w

    def y_of(value: float) -> float:
        return top + plot_h - (math.log10(value) - low) / (high - low) * plot_h

    within = sum(r.status == "ok" for r in rows)
    prefix = "validation" if layout == "wide" else f"validation-{layout}"
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'role="img" aria-labelledby="{prefix}-title {prefix}-desc" class="tm-chart tm-chart-{layout}">',
             f'<title id="{prefix}-title">Predicted against measured bytes</title>',
             f'<desc id="{prefix}-desc">{len(rows)} compared quantities on log-log axes; {within} lie within '
             f'tolerance. Points on the diagonal are exact predictions.</desc>']
    step = max(1, math.ceil(52 * (high - low) / plot_w))  # a label every `step` decades, so that none overlap
    for power in range(low, high + 1):
        x, y = x_of(10 ** power), y_of(10 ** power)
        parts.append(f'<path class="tm-axis" d="M{x:.1f} {top}V{top + plot_h}M{left} {y:.1f}H{left + plot_w}" '
                     f'stroke-width="0.4" fill="none"/>')
        if (power - low) % step:
            continue
        parts.append(f'<text class="tm-text-dim" x="{x:.1f}" y="{top + plot_h + 16}" font-size="{TEXT_SIZE}" '
                     f'text-anchor="middle">{format_power(power)}</text>')
        parts.append(f'<text class="tm-text-dim" x="{left - 6}" y="{y + 4:.1f}" font-size="{TEXT_SIZE}" '
                     f'text-anchor="end">{format_power(power)}</text>')
    parts.append(f'<path class="tm-capacity" d="M{left} {top + plot_h}L{left + plot_w} {top}" stroke-width="1.2" '
                 f'stroke-dasharray="4 3" fill="none"/>')
    parts.append(f'<text class="tm-text" x="{left + plot_w / 2}" y="{top + plot_h + 40}" font-size="{TEXT_SIZE}" '
                 f'text-anchor="middle">measured bytes (log scale)</text>')
    parts.append(f'<text class="tm-text" x="14" y="{top + plot_h / 2}" font-size="{TEXT_SIZE}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {top + plot_h / 2})">predicted bytes (log scale)</text>')
    for row in points:
        parts.append(marker(row.quantity, x_of(row.measured), y_of(row.predicted), row.status != "ok"))
    legend_x = 18 if below else left + plot_w + 18
    legend_y = legend_top
    for quantity, label in LEGEND.items():
        parts.append(marker(quantity, legend_x, legend_y, False))
        parts.append(f'<text class="tm-text" x="{legend_x + 10}" y="{legend_y + 4}" font-size="{TEXT_SIZE}">{label}</text>')
        legend_y += 18
    parts.append(marker("per_layer", legend_x, legend_y, True))
    parts.append(f'<text class="tm-text" x="{legend_x + 10}" y="{legend_y + 4}" font-size="{TEXT_SIZE}">'
                 f'outside tolerance</text>')
    parts.append(f'<text class="tm-text-dim" x="{legend_x - 8}" y="{legend_y + 24}" font-size="{TEXT_SIZE}">'
                 f'dashed: predicted = measured</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def marker(quantity: str, x: float, y: float, outside: bool) -> str:
    """A small marker: circle, square or diamond in the quantity's class; a ring marks a miss."""
    css = MARKER_CLASS[quantity]
    shape = MARKERS[quantity]
    if shape == "circle":
        mark = f'<circle class="{css}" cx="{x:.1f}" cy="{y:.1f}" r="3.2"/>'
    elif shape == "square":
        mark = f'<rect class="{css}" x="{x - 3:.1f}" y="{y - 3:.1f}" width="6" height="6"/>'
    elif shape == "triangle":
        mark = f'<path class="{css}" d="M{x:.1f} {y - 4:.1f}l4 7h-8z"/>'
    else:
        mark = f'<path class="{css}" d="M{x:.1f} {y - 4:.1f}l4 4-4 4-4-4z"/>'
    if outside:
        mark += f'<circle class="tm-capacity" cx="{x:.1f}" cy="{y:.1f}" r="7" fill="none" stroke-width="1.5"/>'
    return mark


def format_power(power: int) -> str:
    """10^power as a short byte label: '1 KB', '10 MB' (decimal, as the axis is in bytes)."""
    names = {0: "1 B", 3: "1 kB", 6: "1 MB", 9: "1 GB"}
    if power in names:
        return names[power]
    base = 3 * (power // 3)
    return f"{10 ** (power - base)} {names.get(base, f'1e{base} B').split(' ', 1)[1]}"
