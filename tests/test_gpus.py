"""The GPU catalog (content/gpus.toml): required ids, capacities pinned to public printouts,
the usable-vs-marketing relation, and errors for malformed catalog files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builder.catalog import CONTENT_DIR, CatalogError, Gpu, load_gpus

CATALOG = CONTENT_DIR / "gpus.toml"
MIB = 2**20
GIB = 2**30

REQUIRED = ["a100-40gb", "a100-80gb", "h100-80gb", "h200", "b200", "mi300x", "rtx-4090", "l4"]


@pytest.fixture(scope="module")
def gpus() -> dict[str, Gpu]:
    return load_gpus(CATALOG)


def _marketing_number(gpu: Gpu) -> int:
    match = re.fullmatch(r"(\d+) GB", gpu.marketing)
    assert match, f"{gpu.id}: marketing {gpu.marketing!r} is not of the form 'N GB'"
    return int(match.group(1))


def test_required_ids_present(gpus):
    missing = [gpu_id for gpu_id in REQUIRED if gpu_id not in gpus]
    assert not missing


def test_every_entry_is_complete(gpus):
    for gpu in gpus.values():
        assert gpu.display and gpu.vendor in {"NVIDIA", "AMD"}
        assert "https://github.com/" in gpu.source, f"{gpu.id}: source names no public URL"


@pytest.mark.parametrize("gpu_id", REQUIRED)
def test_usable_sits_between_marketing_gb_and_marketing_gib(gpus, gpu_id):
    # The sources show the name's "N GB" is really N GiB of raw memory, less what the driver
    # keeps: usable exceeds N decimal GB (H100 "80 GB" -> 85.5e9 bytes) yet never exceeds
    # N GiB, and the reserve is under 10%.
    gpu = gpus[gpu_id]
    n = _marketing_number(gpu)
    assert n * 10**9 < gpu.usable_bytes <= n * GIB
    assert gpu.usable_bytes >= 0.9 * n * GIB


def test_relation_holds_for_optional_entries_too(gpus):
    for gpu in gpus.values():
        n = _marketing_number(gpu)
        assert n * 10**9 < gpu.usable_bytes <= n * GIB, gpu.id
        assert gpu.usable_bytes >= 0.9 * n * GIB, gpu.id


@pytest.mark.parametrize(
    "gpu_id, reported, unit, url",
    [
        # nvidia-smi "0MiB /  81559MiB", NVIDIA H100 80GB HBM3
        ("h100-80gb", 81559, MIB, "https://github.com/NVIDIA/nccl/issues/1264"),
        # nvidia-smi "598MiB /  40960MiB", NVIDIA A100-SXM4-40GB
        ("a100-40gb", 40960, MIB, "https://github.com/bottlerocket-os/bottlerocket-core-kit/pull/834"),
        # nvidia-smi "87MiB / 81920MiB", NVIDIA A100-SXM4-80GB
        ("a100-80gb", 81920, MIB, "https://github.com/NVIDIA/mig-parted/issues/31"),
        # nvidia-smi "124585MiB / 143771MiB", NVIDIA H200
        ("h200", 143771, MIB, "https://github.com/sgl-project/sglang/issues/3196"),
        # nvidia-smi "166593MiB / 183359MiB", NVIDIA B200
        ("b200", 183359, MIB, "https://github.com/NVIDIA/TensorRT-LLM/issues/10278"),
        # rocminfo "Size: 201310208(0xbffc000) KB", AMD Instinct MI300X
        ("mi300x", 201310208, 1024, "https://github.com/ROCm/rocm-examples/issues/187"),
        # nvidia-smi "507MiB /  24564MiB", NVIDIA GeForce RTX 4090
        ("rtx-4090", 24564, MIB, "https://github.com/RLinf/RLinf/issues/255"),
        # table of nvidia-smi totals: "L4: 23034MiB (24.15 GB)"
        ("l4", 23034, MIB, "https://github.com/modal-labs/modal-client/pull/2797"),
    ],
)
def test_values_pinned_to_sources(gpus, gpu_id, reported, unit, url):
    gpu = gpus[gpu_id]
    assert gpu.usable_bytes == reported * unit
    assert url in gpu.source


def test_h100_matches_the_byte_count_quoted_in_its_source(gpus):
    # https://github.com/modal-labs/modal-client/pull/2797: "85520809984 bytes or 85.5 GB on H100"
    assert gpus["h100-80gb"].usable_bytes == 85520809984


def test_mi300x_matches_pytorch_total_capacity_message(gpus):
    # PyTorch on MI300X: "GPU 0 has a total capacity of 191.98 GiB" (2 decimals, rounded).
    assert round(gpus["mi300x"].usable_bytes / GIB, 2) == 191.98


def test_catalog_order_is_file_order(gpus):
    assert list(gpus)[:3] == ["a100-40gb", "a100-80gb", "h100-80gb"]


# --- malformed catalogs ------------------------------------------------------------------------

GOOD_ENTRY = 'display = "X"\nusable_bytes = 1024\nmarketing = "1 GB"\n'


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gpus.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_missing_field_names_file_line_and_field(tmp_path):
    text = "# header\n\n[ok]\n" + GOOD_ENTRY + "\n[broken]\ndisplay = \"Y\"\nmarketing = \"2 GB\"\n"
    path = _write(tmp_path, text)  # [broken] is on line 8
    with pytest.raises(CatalogError) as info:
        load_gpus(path)
    message = str(info.value)
    assert message.startswith(f"{path}:8:")
    assert "[broken]" in message and "usable_bytes" in message


def test_unknown_field_is_rejected_with_its_line(tmp_path):
    path = _write(tmp_path, "[one]\n" + GOOD_ENTRY + "[two]\n" + GOOD_ENTRY + "capacity = 3\n")
    with pytest.raises(CatalogError) as info:
        load_gpus(path)
    assert str(info.value).startswith(f"{path}:5:")
    assert "capacity" in str(info.value)


def test_non_positive_or_non_integer_usable_bytes_is_rejected(tmp_path):
    for bad in ("0", "-5", "80.5", '"80 GiB"'):
        path = _write(tmp_path, f'[x]\ndisplay = "X"\nusable_bytes = {bad}\nmarketing = "1 GB"\n')
        with pytest.raises(CatalogError) as info:
            load_gpus(path)
        assert str(info.value).startswith(f"{path}:1:"), bad


def test_bad_toml_names_file_and_line(tmp_path):
    text = "[ok]\n" + GOOD_ENTRY + "\n[bad]\ndisplay = \"unterminated\nmarketing = \"1 GB\"\n"
    path = _write(tmp_path, text)  # the unterminated string is on line 7
    with pytest.raises(CatalogError) as info:
        load_gpus(path)
    message = str(info.value)
    assert message.startswith(f"{path}:7:")
    assert "invalid TOML" in message


def test_missing_file_is_a_catalog_error(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(CatalogError) as info:
        load_gpus(path)
    assert str(info.value).startswith(f"{path}:1:")
