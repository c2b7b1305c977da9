"""Load the model and GPU catalogs from content/ (TOML), with errors that name file and line."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any, Iterator

from builder.model.architecture import Architecture, ConfigFieldError, from_hf_config


class CatalogError(ValueError):
    """A catalog file is malformed; the message starts with 'file:line:'."""


@dataclass(frozen=True)
class Gpu:
    """One accelerator: the capacity a CUDA process sees, the driver's own total, and its marketing name."""

    id: str  # the table's name in content/gpus.toml, what pages write in gpus:, gpu: and widget options
    display: str  # e.g. 'H100 SXM 80GB'
    usable_bytes: int  # what a CUDA process sees: cudaMemGetInfo's total (torch.cuda.mem_get_info()[1])
    marketing: str  # the size in the product name, e.g. '80 GB' (decimal, as vendors write it)
    vendor: str = ""  # e.g. 'NVIDIA', 'AMD'
    source: str = ""  # where usable_bytes comes from
    driver_total_bytes: int = 0  # the total nvidia-smi (AMD: rocminfo) prints, at least usable_bytes; 0: not given
    driver_source: str = ""  # where driver_total_bytes comes from
    multiprocessors: int = 0  # SMs (AMD: compute units), as deviceQuery or PyTorch prints them; 0: not given
    threads_per_multiprocessor: int = 0  # the threads an SM holds at once; 0: not given
    multiprocessor_source: str = ""  # where the two come from


def short_gpu_name(display: str) -> str:
    """A GPU's name short enough for a capacity label on a 320 px screen, where the label sits beside the amount
    it stands for: 'RTX 4090', 'H100', 'H100 NVL', 'A100' (the form factor and the size in the name dropped)."""
    words = display.replace("GeForce ", "").replace(" SXM", "").split()
    return " ".join(words[:-1]) if len(words) > 1 and re.fullmatch(r"\d+GB", words[-1]) else " ".join(words)


_ARCH_FIELDS = {f.name for f in fields(Architecture)} - {"name", "extra"}
# Fields of a models.toml table that are not Architecture fields: they go to Architecture.extra.
MODEL_META = {"display": "the name readers see, e.g. 'Llama 3 8B'",
              "published_active_params": "MoE: the published count of parameters active per token, checked in tests"}
_MODEL_META = set(MODEL_META)
_GPU_FIELDS = {f.name for f in fields(Gpu)} - {"id"}
GPU_REQUIRED = tuple(f.name for f in fields(Gpu) if f.name != "id" and f.default is MISSING)


def _line_of(text: str, key: str) -> int:
    """1-based line of the table header `[key]` or `["key"]` in a TOML file (1 if not found)."""
    pattern = re.compile(r'^\[\s*"?' + re.escape(key) + r'"?\s*\]\s*$')
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line.strip()):
            return number
    return 1


def _read_toml(path: Path) -> tuple[dict[str, Any], str]:
    """Parse a TOML file; syntax errors become CatalogError with the line number."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CatalogError(f"{path}:1: cannot read catalog ({error.strerror})") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as error:
        match = re.search(r"line (\d+)", str(error))
        line = match.group(1) if match else "1"
        raise CatalogError(f"{path}:{line}: invalid TOML: {error}") from None


def _tables(path: Path) -> Iterator[tuple[str, dict[str, Any], int]]:
    """(id, table, line of its header) for every top-level table of a TOML catalog."""
    data, text = _read_toml(path)
    for table_id, entry in data.items():
        line = _line_of(text, table_id)
        if not isinstance(entry, dict):
            raise CatalogError(f"{path}:{line}: [{table_id}] must be a table")
        yield table_id, entry, line


def load_models(path: Path) -> dict[str, Architecture]:
    """Read content/models.toml into Architectures keyed by id, in file order."""
    models: dict[str, Architecture] = {}
    for model_id, entry, line in _tables(path):
        unknown = set(entry) - _ARCH_FIELDS - _MODEL_META
        if unknown:
            raise CatalogError(f"{path}:{line}: [{model_id}] unknown field(s): {', '.join(sorted(unknown))}")
        arch_fields = {k: v for k, v in entry.items() if k in _ARCH_FIELDS}
        extra = {k: v for k, v in entry.items() if k in _MODEL_META}
        try:
            models[model_id] = Architecture(name=model_id, extra=extra, **arch_fields)
        except (TypeError, ValueError) as error:
            raise CatalogError(f"{path}:{line}: [{model_id}] {error}") from None
    return models


def load_gpus(path: Path) -> dict[str, Gpu]:
    """Read content/gpus.toml into Gpus keyed by id, in file order."""
    gpus: dict[str, Gpu] = {}
    for gpu_id, entry, line in _tables(path):
        unknown = set(entry) - _GPU_FIELDS
        missing = set(GPU_REQUIRED) - set(entry)
        if unknown or missing:
            problem = f"unknown field(s): {', '.join(sorted(unknown))}" if unknown else \
                f"missing field(s): {', '.join(sorted(missing))}"
            raise CatalogError(f"{path}:{line}: [{gpu_id}] {problem}")
        for field in ("usable_bytes", "driver_total_bytes", "multiprocessors", "threads_per_multiprocessor"):
            if field in entry and (not isinstance(entry[field], int) or isinstance(entry[field], bool)
                                   or entry[field] <= 0):
                raise CatalogError(f"{path}:{line}: [{gpu_id}] {field} must be a positive integer")
        if entry.get("driver_total_bytes", entry["usable_bytes"]) < entry["usable_bytes"]:
            raise CatalogError(f"{path}:{line}: [{gpu_id}] usable_bytes (what a CUDA process sees) cannot exceed "
                               "driver_total_bytes (the driver's own total)")
        gpus[gpu_id] = Gpu(id=gpu_id, **entry)
    return gpus


HF_CONFIG_LIMIT = 1 << 20  # bytes read of a config.json: real ones are a few KB; /dev/zero must not fill memory


def load_hf_config(path: Path, name: str | None = None) -> Architecture:
    """Read a Hugging Face config.json from a local file into an Architecture (at most HF_CONFIG_LIMIT bytes)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(HF_CONFIG_LIMIT + 1)
        if len(raw) > HF_CONFIG_LIMIT:
            raise CatalogError(f"{path}: larger than {HF_CONFIG_LIMIT:,} bytes, which no config.json is; "
                               "only that much is read")
        config = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CatalogError(f"{path}: not UTF-8 text") from None
    except OSError as error:
        raise CatalogError(f"{path}: cannot read ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise CatalogError(f"{path}:{error.lineno}: invalid JSON: {error.msg}") from None
    if not isinstance(config, dict):
        raise CatalogError(f"{path}: a config.json is a JSON object of fields, not {type(config).__name__}")
    try:
        return from_hf_config(config, name or path.stem)
    except ConfigFieldError as error:
        line = _json_line(raw.decode("utf-8"), error.field)
        raise CatalogError(f"{path}:{line}: {error}" if line else f"{path}: {error}") from None
    except ValueError as error:
        raise CatalogError(f"{path}: {error}") from None


def _json_line(text: str, field: str) -> int:
    """The 1-based line of a config.json's key `field` (rope_scaling.factor: the key factor after rope_scaling), or
    0 where it is not found."""
    at = 0
    for key in field.split("."):
        match = re.compile(r'"' + re.escape(key) + r'"\s*:').search(text, at)
        if match is None:
            return 0
        at = match.end()
    return text.count("\n", 0, at) + 1


CONTENT_DIR = Path(__file__).resolve().parent.parent / "content"


def default_models() -> dict[str, Architecture]:
    """The shipped model catalog."""
    return load_models(CONTENT_DIR / "models.toml")


def default_gpus() -> dict[str, Gpu]:
    """The shipped GPU catalog."""
    return load_gpus(CONTENT_DIR / "gpus.toml")
