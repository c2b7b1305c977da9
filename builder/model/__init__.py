"""The memory model: pure functions from a Config to a Breakdown of per-GPU bytes.

No files, no templates, no plotting here: the catalogs are read by builder.catalog and
passed in as data.
"""

from builder.model.architecture import Architecture, active_param_count, from_hf_config, param_count, param_groups
from builder.model.breakdown import BUCKETS, Breakdown, Part
from builder.model.config import PRECISIONS, Config, PrecisionPolicy, validate_config
from builder.model.estimator import estimate
from builder.model.units import GB, GiB, dtype_bytes, format_bytes, parse_size

__all__ = [
    "Architecture", "Breakdown", "BUCKETS", "Config", "GB", "GiB", "PRECISIONS", "Part",
    "PrecisionPolicy", "active_param_count", "dtype_bytes", "estimate", "format_bytes",
    "from_hf_config", "param_count", "param_groups", "parse_size", "validate_config",
]

