"""What a bar is made of: its segments (a bucket or a part each, bottom first) and the GPUs it overflows."""

from __future__ import annotations

from dataclasses import dataclass

from builder.catalog import Gpu
from builder.charts.format import (MAX_RULE, class_bucket, combine_rules, format_amount, format_both, name_bucket,
                                   name_part, shorten_rule)
from builder.charts.spec import ChartBar, ChartSpec
from builder.model.breakdown import Breakdown, Part


@dataclass(frozen=True)
class Segment:
    """One slice of a stacked bar: a bucket or a part, with what its note says."""

    key: str  # bucket or part name
    name: str  # shown to the reader
    bytes: int
    rule: str  # bytes-per-unit rule, e.g. '2 B/param'
    css: str  # fill classes
    detail: tuple[str, ...] = ()  # extra tooltip lines (the parts of a bucket)


def order_parts(breakdown: Breakdown) -> list[Part]:
    """Parts in stacking order: by bucket as Breakdown.buckets() orders them, then as given."""
    rank = {bucket: index for index, bucket in enumerate(breakdown.buckets())}
    return sorted((p for p in breakdown.parts if p.bytes > 0), key=lambda p: rank[p.bucket])


def collect_segments(bar: ChartBar, spec: ChartSpec) -> list[Segment]:
    """The slices of one bar, bottom first, grouped by bucket or one per part."""
    parts = order_parts(bar.breakdown)
    if spec.group_by == "part":
        segments = []
        shade: dict[str, int] = {}
        for part in parts:
            index = shade.get(part.bucket, 0)
            shade[part.bucket] = index + 1
            css = f"{class_bucket(part.bucket)} tm-shade-{index % 3}"
            detail = (f"{name_part(part, spec)}: {part.per_unit}",) if len(part.per_unit) > MAX_RULE else ()
            segments.append(Segment(part.name, name_part(part, spec), part.bytes, shorten_rule(part.per_unit), css, detail))
        return segments
    segments = []
    for bucket in dict.fromkeys(p.bucket for p in parts):
        members = [p for p in parts if p.bucket == bucket]
        detail = tuple(f"{name_part(p, spec)}: {format_amount(p.bytes, spec.unit)}" + (f" · {p.per_unit}" if p.per_unit else "")
                       for p in members) if len(members) > 1 else ()
        amount = sum(p.bytes for p in members)
        rule = combine_rules(members)
        segments.append(Segment(bucket, name_bucket(bucket, spec), amount, rule, class_bucket(bucket), detail))
    return segments


def describe_segment(segment: Segment, unit: str, also: str = "") -> str:
    """The note beside a segment: 'Weights 13.0 GiB · 2 B/param' (with `also`: 'Weights 28.0 GB (26.1 GiB) · ...')."""
    text = f"{segment.name} {format_both(segment.bytes, unit, also)}"
    return f"{text} · {segment.rule}" if segment.rule else text


def find_overflow(total: int, gpus: tuple[Gpu, ...]) -> list[Gpu]:
    """GPUs whose usable memory `total` exceeds, smallest first."""
    return sorted((gpu for gpu in gpus if total > gpu.usable_bytes), key=lambda gpu: (gpu.usable_bytes, gpu.display))
