"""The GPU catalog (content/gpus.toml): required ids, capacities pinned to public printouts,
what a CUDA process sees against the driver's total and the marketing size, and errors for malformed catalog files."""

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
        assert "https://" in gpu.source, f"{gpu.id}: source names no public URL"
        assert "https://github.com/" in gpu.driver_source, f"{gpu.id}: driver_source names no public URL"
        assert gpu.driver_total_bytes, f"{gpu.id}: no driver total"


def test_cuda_total_is_below_the_drivers_total_which_is_below_marketing_gib(gpus):
    """The order the catalog's header explains, for every entry: what a CUDA process sees (cudaMemGetInfo's total)
    <= what nvidia-smi / rocminfo print <= N GiB for a name of "N GB"; nvidia-smi's total exceeds N decimal GB
    (H100 "80 GB" -> 85.5e9 bytes), and neither total is more than 10 % under N GiB."""
    for gpu in gpus.values():
        n = _marketing_number(gpu)
        assert gpu.usable_bytes <= gpu.driver_total_bytes <= n * GIB, gpu.id
        assert n * 10**9 < gpu.driver_total_bytes, gpu.id
        assert gpu.usable_bytes >= 0.9 * n * GIB, gpu.id


THAMADA = "https://github.com/thamada/nvidia-smi/blob/b09ef139265ffc7e3c78006346981de8e4d70499/gls/"
ORIMANABU = ("https://github.com/orimanabu/zenndocs/blob/f265173d5093b03d0917d518378a11be4178637d/articles/"
             "try-rhel-with-nvidia-gpu.md")
ACHATBOT = ("https://github.com/ai-bot-pro/achatbot/blob/859e21612de769164d8d1802d794ef8f87ace3c8/deploy/modal/src/llm/"
            "vllm/vlm/skywork_r1v.py")


@pytest.mark.parametrize(
    "gpu_id, reported, unit, url",
    [
        # deviceQuery "40339 MBytes (42298834944 bytes)", NVIDIA A100-SXM4-40GB, CUDA driver 12.2
        ("a100-40gb", 42298834944, 1, "https://github.com/bottlerocket-os/bottlerocket/pull/3873"),
        # deviceQuery "81158 MBytes (85100068864 bytes)", NVIDIA A100-SXM4-80GB, driver 555.42.02
        ("a100-80gb", 85100068864, 1, THAMADA + "A100SXMx4_deviceQuery.py"),
        # deviceQuery "81090 MBytes (85028896768 bytes)", NVIDIA H100 80GB HBM3, driver 570.133.20
        ("h100-80gb", 85028896768, 1, ORIMANABU),
        # deviceQuery "95235 MBytes (99861594112 bytes)", NVIDIA H100 NVL, driver 550.54.14
        ("h100-nvl", 99861594112, 1, THAMADA + "H100NVLx2_deviceQuery.py"),
        # PyTorch "_CudaDeviceProperties(name='NVIDIA H200', ..., total_memory=143156MB" (MiB, rounded down)
        ("h200", 143156, MIB, ACHATBOT),
        # HIP "196592: Total Global Memory (MB)", AMD Instinct MI300X
        ("mi300x", 196592, MIB, THAMADA + "MI300X_x4_deviceQuery.py"),
        # deviceQuery "24210 MBytes (25386352640 bytes)", NVIDIA GeForce RTX 4090, Linux driver 550.127.05
        ("rtx-4090", 25386352640, 1, THAMADA + "RTX4090_deviceQuery.py"),
        # deviceQuery "24154 MBytes (25327697920 bytes)", NVIDIA GeForce RTX 3090, Linux driver 560.35.03
        ("rtx-3090", 25327697920, 1, THAMADA + "RTX3090_deviceQuery.py"),
        # deviceQuery "22478 MBytes (23570219008 bytes)", NVIDIA L4, driver 550.90.07
        ("l4", 23570219008, 1, THAMADA + "L4_deviceQuery.py"),
        # cuda-device-query "45373 MBytes (47576711168 bytes)", NVIDIA L40S, CUDA driver 12.4
        ("l40s", 47576711168, 1, "https://github.com/alvarobartt/cuda-device-query/blob/"),
        # PyTorch "_CudaDeviceProperties(name='NVIDIA A10G', ..., total_memory=22587MB" in TorchCodec's docs build
        ("a10g", 22587, MIB, "basic_cuda_example"),
        # deviceQuery "32117 MBytes (33677180928 bytes)", NVIDIA GeForce RTX 5090, Linux driver 570.133.04
        ("rtx-5090", 33677180928, 1, "https://github.com/aikitoria/open-gpu-kernel-modules/issues/1"),
        # deviceQuery "48640 MBytes (51002867712 bytes)", NVIDIA RTX 6000 Ada Generation, driver 550.127.05, ECC off
        ("rtx-6000-ada", 51002867712, 1, THAMADA + "RTX6000Ada_x8_deviceQuery.py"),
        # deviceQuery "45619 MBytes (47834660864 bytes)", NVIDIA RTX A6000, driver CUDA 12.4, ECC on
        ("rtx-a6000", 47834660864, 1, "https://github.com/thamada/gls/blob/ecc9fb580a9542c249e51fec30eba202cef7eba3/"
                                      "gls/RTX_A6000_x9_deviceQuery.py"),
        # CUDA device_info "24226 MBytes (25402343424 bytes)", NVIDIA RTX A5000, compute 8.6 (CSinParallel book)
        ("rtx-a5000", 25402343424, 1, "https://github.com/csinparallel/intro-parallel-book/blob/"
                                      "650be18c954763ba16274fe2ebb5ddaf43dda3ef/_sources/4-cuda/1-gpu-device.rst"),
    ],
)
def test_cuda_totals_pinned_to_their_printouts(gpus, gpu_id, reported, unit, url):
    gpu = gpus[gpu_id]
    assert gpu.usable_bytes == reported * unit
    assert url in gpu.source


@pytest.mark.parametrize("gpu_id, gib, url", [
    # cudaGetDeviceProperties "Total Global Memory: 178.35 GB" (totalGlobalMem / 2**30), NVIDIA B200
    ("b200", 178.35, "https://github.com/pytorch/ao/pull/4002"),
    # PyTorch OOM "GPU 0 has a total capacity of 14.56 GiB" on a Tesla T4 (GCP)
    ("t4", 14.56, "https://github.com/Zheng-Chong/CatVTON/issues/133"),
])
def test_totals_printed_to_a_hundredth_of_a_gib_are_stored_as_printed(gpus, gpu_id, gib, url):
    gpu = gpus[gpu_id]
    assert gpu.usable_bytes == round(gib * GIB)
    assert url in gpu.source


@pytest.mark.parametrize("gpu_id, printed", [
    ("h100-80gb", 79.19),  # PyTorch OOM on H100: "GPU 0 has a total capacity of 79.19 GiB"
    ("h200", 139.80),  # PyTorch OOM on H200: "GPU 0 has a total capacity of 139.80 GiB"
    ("mi300x", 191.98),  # PyTorch (HIP) OOM on MI300X: "GPU 0 has a total capacity of 191.98 GiB"
])
def test_cuda_totals_match_pytorchs_total_capacity_messages(gpus, gpu_id, printed):
    assert round(gpus[gpu_id].usable_bytes / GIB, 2) == printed


@pytest.mark.parametrize("gpu_id, other, text, url", [
    # The rule: the smallest of the cited printouts. The larger ones each entry also cites:
    ("h100-80gb", 85045477376, "85045477376", THAMADA + "H100SXMx8_deviceQuery.py"),  # driver 565.57.01
    ("l40s", 47803596800, "47803596800", THAMADA + "L40S_deviceQuery.py"),  # driver 550.127.05
    ("b200", 182642 * MIB, "total_memory=182642MB", ACHATBOT),  # PyTorch on a Modal B200
    ("t4", 15642329088, "15642329088", "https://github.com/AlphaGPU/leetgpu-challenges/issues/52"),
    # RTX A6000 with ECC off: deviceQuery on the University of Geneva's Baobab node gpu048, PyTorch in torchao's HQQ
    # README (48676 MiB, the smaller of the two).
    ("rtx-a6000", 51160023040, "51160023040", "https://hpc-community.unige.ch/t/3741"),
    ("rtx-a6000", 48676 * MIB, "total_memory=48676MB", "torchao/prototype/hqq/README.md"),
])
def test_the_smallest_cited_cuda_total_is_kept(gpus, gpu_id, other, text, url):
    gpu = gpus[gpu_id]
    assert gpu.usable_bytes < other
    assert text in gpu.source and url in gpu.source


@pytest.mark.parametrize("gpu_id, smi_mib", [
    # The same machines' nvidia-smi beside the deviceQuery cited for usable_bytes (thamada/nvidia-smi gls/*_smi.py,
    # orimanabu/zenndocs): the catalog's driver totals, so each gap is one driver's on one board.
    ("a100-80gb", 81920), ("h100-80gb", 81559), ("h100-nvl", 95830), ("rtx-4090", 24564), ("rtx-3090", 24576),
    ("l4", 23034), ("rtx-6000-ada", 49140), ("rtx-a6000", 46068),
])
def test_same_machine_nvidia_smi_totals_are_the_driver_totals(gpus, gpu_id, smi_mib):
    gpu = gpus[gpu_id]
    assert gpu.driver_total_bytes == smi_mib * MIB
    assert f"nvidia-smi shows {smi_mib}MiB" in gpu.source


def test_the_gap_between_nvidia_smi_and_cuda_on_one_machine(gpus):
    """H100 (driver 570.133.20, orimanabu/zenndocs): nvidia-smi 81559MiB, deviceQuery 85028896768 bytes, 469.1 MiB
    apart; RTX 4090 (driver 550.127.05, thamada/nvidia-smi): 24564MiB and 25386352640 bytes, 353.7 MiB apart. On the
    MI300X HIP sees rocminfo's whole pool (thamada/nvidia-smi MI300X_x4_deviceQuery.py and _rocminfo.py)."""
    h100, rtx = gpus["h100-80gb"], gpus["rtx-4090"]
    assert h100.driver_total_bytes - h100.usable_bytes == 81559 * MIB - 85028896768
    assert round((h100.driver_total_bytes - h100.usable_bytes) / MIB, 1) == 469.1
    assert round((rtx.driver_total_bytes - rtx.usable_bytes) / MIB, 1) == 353.7
    assert gpus["mi300x"].usable_bytes == gpus["mi300x"].driver_total_bytes == 201310208 * 1024


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
        # nvidia-smi "29247MiB /  32607MiB", NVIDIA GeForce RTX 5090, driver 610.57.04
        ("rtx-5090", 32607, MIB, "https://github.com/noonghunna/club-3090/issues/1075"),
        # nvidia-smi "2MiB /  49140MiB", NVIDIA RTX 6000 Ada Generation, driver 550.127.05
        ("rtx-6000-ada", 49140, MIB, THAMADA + "RTX6000Ada_x8_smi.py"),
        # nvidia-smi "1MiB /  46068MiB", NVIDIA RTX A6000, driver 550.127.05, ECC on
        ("rtx-a6000", 46068, MIB, "https://github.com/thamada/gls/blob/ecc9fb580a9542c249e51fec30eba202cef7eba3/"
                                  "gls/RTX_A6000_x9_smi.py"),
        # nvidia-smi --query-gpu "NVIDIA RTX A5000, 24564 MiB, 570.211.01"
        ("rtx-a5000", 24564, MIB, "https://github.com/akash-network/provider-configs/issues/82"),
    ],
)
def test_driver_totals_pinned_to_sources(gpus, gpu_id, reported, unit, url):
    gpu = gpus[gpu_id]
    assert gpu.driver_total_bytes == reported * unit
    assert url in gpu.driver_source


def test_h100_driver_total_matches_the_byte_count_quoted_in_its_source(gpus):
    # https://github.com/modal-labs/modal-client/pull/2797: "85520809984 bytes or 85.5 GB on H100"
    assert gpus["h100-80gb"].driver_total_bytes == 85520809984


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


def test_driver_total_below_the_cuda_total_is_rejected(tmp_path):
    path = _write(tmp_path, '[x]\ndisplay = "X"\nusable_bytes = 2048\nmarketing = "1 GB"\ndriver_total_bytes = 1024\n')
    with pytest.raises(CatalogError, match=r":1: \[x\] usable_bytes .* cannot exceed driver_total_bytes"):
        load_gpus(path)
    for bad in ("0", "80.5", "true"):
        path = _write(tmp_path, f'[x]\ndisplay = "X"\nusable_bytes = 1\nmarketing = "1 GB"\ndriver_total_bytes = {bad}\n')
        with pytest.raises(CatalogError, match="driver_total_bytes must be a positive integer"):
            load_gpus(path)


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
