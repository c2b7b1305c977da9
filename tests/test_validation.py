"""The validation harness measures what it says, and the model stays within tolerance of it.

Hand-checkable cases first (a single Linear, dedup by storage, optimizer states), then the
op-level totals of tiny GPT-2 and Llama layers derived from transformers 5.23.0's modeling
code, then the `--small` comparison of every case against builder.model.estimate.
"""

from __future__ import annotations

import sys

import pytest

from tests import validate_extra

pytestmark = pytest.mark.validate
torch, _ = validate_extra.modules("torch", "transformers")

from builder.validate import MISSING_EXTRA, MissingExtra, require_torch  # noqa: E402
from builder.validate.cases import (ActivationCase, StateCase, peak_cases, small_activation_cases,  # noqa: E402
                                    state_cases)
from builder.validate.saved import SavedTensorRecorder, total_saved  # noqa: E402

torch.set_num_threads(1)


# The recorder on hand-checkable graphs ------------------------------------------------

def test_single_linear_saves_exactly_its_input():
    """nn.Linear(h, h) without bias saves its input (b*s*h*4 bytes in fp32) and its weight (a parameter)."""
    b, s, h = 3, 5, 8
    layer = torch.nn.Linear(h, h, bias=False)
    x = torch.randn(b, s, h, requires_grad=True)
    with SavedTensorRecorder(layer) as recorder:
        layer(x)
    totals = total_saved(recorder.records)
    assert totals.activation_storage_bytes == b * s * h * 4 == 480
    assert totals.parameter_bytes == h * h * 4
    assert totals.buffer_bytes == 0 and totals.input_bytes == 0


def test_tensor_saved_twice_counts_once():
    """The same input saved by two matmuls (like q/k/v projections) is one storage."""
    x = torch.randn(4, 6, requires_grad=True)
    w1 = torch.randn(6, 6, requires_grad=True)
    w2 = torch.randn(6, 6, requires_grad=True)
    with SavedTensorRecorder() as recorder:
        (x @ w1) + (x @ w2)
    totals = total_saved(recorder.records)
    # x (96 B) once, w1 and w2 (144 B each) are plain tensors here, so activations: 96 + 144 + 144
    assert totals.activation_storage_bytes == 96 + 144 + 144
    assert totals.distinct_storages == 3 and totals.records == 4
    assert sum(r.is_duplicate for r in recorder.records) == 1


def test_view_of_larger_storage_counts_the_whole_storage():
    """A saved slice keeps its whole base alive: storage bytes = base, tensor bytes = the slice."""
    base = torch.randn(4, 30)  # 480 bytes, e.g. a fused qkv output
    weight = torch.randn(10, 10, requires_grad=True)
    key = base[:, 10:20]  # a 4x10 view, 160 bytes
    with SavedTensorRecorder() as recorder:
        key @ weight
    records = [r for r in recorder.records if r.shape == (4, 10)]
    assert len(records) == 1 and records[0].storage_bytes == 480 and records[0].tensor_bytes == 160
    totals = total_saved(recorder.records)  # only `key` is saved: the weight's gradient needs it, not vice versa
    assert totals.activation_storage_bytes == 480
    assert totals.activation_tensor_bytes == 160


def test_buffers_and_inputs_are_reported_apart():
    """A saved module buffer and the caller's input are excluded from activation bytes."""
    module = torch.nn.Module()
    module.register_buffer("scale", torch.randn(8))
    module.weight = torch.nn.Parameter(torch.randn(8))
    x = torch.randn(2, 8)
    with SavedTensorRecorder(module, inputs=[x]) as recorder:
        torch.exp(x * torch.sin(module.weight)) * module.scale
    totals = total_saved(recorder.records)
    assert totals.parameter_bytes == 32  # sin saves the weight
    assert totals.input_bytes == 64  # x, saved by the first multiply
    assert totals.activation_storage_bytes == 64  # exp saves its result (2 x 8 fp32)
    assert totals.buffer_bytes == 32  # the last multiply saves the buffer


# Op-level totals of tiny transformers layers (transformers 5.23.0, torch 2.13.0) ------------

def measure(case: ActivationCase) -> dict:
    """Measured per-layer and rest bytes of a case."""
    from builder.validate.measure import measure_activation_case

    return measure_activation_case(case)


def test_gpt2_eager_fp32_layer_matches_its_op_list():
    """GPT-2 block, eager, fp32, no dropout: 32 B per b*s*h + 16 per b*s + 20 per b*s*ffn + 4 per b*a*s*s.

    From content/validation/saved_tensors_gpt2_eager_fp32.json: LayerNorm inputs (2) and
    mean/rstd (4 x b*s), inputs of c_attn, c_proj, c_fc (3), q, k^T, v (3), attention output
    into c_proj (counted in the 3), gelu_new's 4 saved b*s*ffn tensors and c_proj's input,
    the softmax result (shared with the probs@v matmul when dropout is off).
    """
    case = ActivationCase(family="gpt2", batch=2, seq_len=16, hidden=32, heads=4, vocab=64)
    b, s, h, a, ffn = 2, 16, 32, 4, 128
    expected = 4 * (8 * b * s * h + 4 * b * s + 5 * b * s * ffn + b * a * s * s)
    assert measure(case)["per_layer"]["activation_storage_bytes"] == expected == 123392


def test_llama_sdpa_fp32_layer_matches_its_op_list():
    """Llama block, sdpa (CPU flash kernel), fp32, GQA: from saved_tensors_llama_sdpa_fp32.json.

    Two RMSNorms (fp32 input and normalized output, b*s*h each, and rsqrt b*s), q/k/v input
    (one storage), gate/up input (one storage): 6 b*s*h; SDPA query and output (= o_proj
    input): 2 b*a*s*d; key and value at kv heads; logsumexp b*a*s; silu input, gate*up
    operands and down input: 4 b*s*ffn. Rotary cos/sin are shared by all layers (not per layer).
    """
    case = ActivationCase(family="llama", attention="sdpa", batch=2, seq_len=16, hidden=32, heads=4, kv_heads=2,
                          ffn=48, vocab=64)
    b, s, h, a, kv, d, ffn = 2, 16, 32, 4, 2, 8, 48
    expected = 4 * (6 * b * s * h + 2 * b * s + 2 * a * b * s * d + 2 * b * kv * s * d + b * a * s + 4 * b * s * ffn)
    result = measure(case)
    assert result["per_layer"]["activation_storage_bytes"] == expected == 62208
    assert result["sdpa_kernel"] == "flash_cpu"


def test_full_recompute_keeps_only_the_layer_input():
    """Under checkpointing each layer holds its input hidden states: b*s*h*bytes (bf16: 2)."""
    case = ActivationCase(family="llama", dtype="bfloat16", batch=2, seq_len=16, hidden=32, heads=4, kv_heads=2,
                          ffn=48, vocab=64, recompute="full")
    assert measure(case)["per_layer"]["activation_storage_bytes"] == 2 * 16 * 32 * 2


def test_dropout_masks_are_one_byte():
    """GPT-2 with dropout adds 2 bool masks per layer (attention output, MLP output) + 1 on attention probs."""
    base = ActivationCase(family="gpt2", batch=2, seq_len=16, hidden=32, heads=4, vocab=64)
    without = measure(base)["per_layer"]["activation_storage_bytes"]
    with_dropout = measure(base.with_changes(dropout=True))["per_layer"]["activation_storage_bytes"]
    b, s, h, a = 2, 16, 32, 4
    # masks b*s*h twice and b*a*s*s once (1 byte), plus the dropped-out probs b*a*s*s (4 bytes)
    assert with_dropout - without == 2 * b * s * h + b * a * s * s + 4 * b * a * s * s


@pytest.mark.parametrize("name", ["qwen2_moe-sdpa-bf16-b2-s64-h64-a4-kv2-f96-e4k2-sh2-nonorm-v256-none-nodrop",
                                  "deepseek_v3-sdpa-fp32-b2-s64-h64-a4-kv4-f96-e4k2-sh1-g2-v256-none-nodrop"])
def test_moe_blocks_measure_as_committed(name):
    """transformers 5.23's Qwen2-MoE and DeepSeek-V3 blocks with grouped_mm experts, measured now, save what
    content/validation/moe.json holds (its byte sums are derived op by op in tests/test_moe_activations.py)."""
    import json

    from builder.validate.cases import moe_cases
    from builder.validate.results import VALIDATION_DIR

    committed = next(c for c in json.loads((VALIDATION_DIR / "moe.json").read_text())["cases"] if c["name"] == name)
    result = measure(next(c for c in moe_cases() if c.name == name))
    assert result["moe_block"] == committed["moe_block"]
    assert result["per_layer"] == committed["per_layer"]


@pytest.mark.parametrize("name, document", [
    ("qwen3-sdpa-bf16-b2-s64-h64-a4-kv2-f176-v256-none-nodrop", "activations.json"),
    ("deepseek_v3-sdpa-bf16-b2-s64-h64-a4-kv4-f96-e4k2-sh1-g2-q24-v256-none-nodrop", "moe.json"),
    ("deepseek_v3-sdpa-bf16-b2-s64-h64-a4-kv4-f96-e4k2-sh1-g2-q24-fd1-v256-none-nodrop", "moe.json")])
def test_attention_variants_measure_as_committed(name, document):
    """transformers 5.23's Qwen3 layer (q/k norms), DeepSeek-V3 layer with a low-rank query (latent attention) and
    DeepSeek-V3 model with a first dense layer, measured now, save what the committed files hold (their byte sums are
    derived op by op in tests/test_attention_variants.py)."""
    import json

    from builder.validate.cases import full_activation_cases, moe_cases
    from builder.validate.results import VALIDATION_DIR

    committed = next(c for c in json.loads((VALIDATION_DIR / document).read_text())["cases"] if c["name"] == name)
    result = measure(next(c for c in full_activation_cases() + moe_cases() if c.name == name))
    assert result["per_layer"] == committed["per_layer"]
    assert result["rest"] == committed["rest"]
    assert result["two_layers"] == committed["two_layers"]
    assert result.get("moe_block") == committed.get("moe_block")


@pytest.mark.parametrize("family", ["qwen2_moe", "deepseek_v2"])
def test_moe_parameters_as_transformers_builds_them(family):
    """Every parameter of a two-layer Qwen2-MoE (its shared expert's gate, Linear(h, 1), included) and DeepSeek-V2
    model as transformers 5.23 builds it is counted (builder.model.tensors), element for element. (DeepSeek-V3's
    e_score_correction_bias is a buffer in transformers 5.23, a stored tensor in the checkpoint whose count the
    catalog pins.)"""
    from builder.model import from_hf_config
    from builder.model.architecture import param_count
    from builder.validate.cases import MOE_BASE, hf_config
    from builder.validate.hf_models import build_model

    case = MOE_BASE.with_changes(family=family, shared_experts=2, kv_heads=4 if family == "deepseek_v2" else 2)
    config = hf_config(case, 2)
    model = build_model(config, "float32")
    assert param_count(from_hf_config(config)) == sum(p.numel() for p in model.parameters())


# Model states ---------------------------------------------------------------------------

def states(case: StateCase) -> dict:
    """Measured model states."""
    from builder.validate.states import measure_state_case

    return measure_state_case(case)["measured"]


@pytest.mark.parametrize("optimizer, state_count", [("adam", 2), ("adamw", 2), ("sgd-momentum", 1)])
def test_optimizer_state_bytes_are_param_count_times_bytes(optimizer, state_count):
    """fp32: weights = grads = 4 B/param, states = 4 B/param each (Adam m and v; SGD momentum)."""
    measured = states(StateCase(family="llama", optimizer=optimizer, kv_heads=2))
    params = measured["params"]
    assert params == 125248  # 2 layers h64 a4 kv2 ffn176 V256, untied: builder.model.param_count agrees
    assert measured["parameter_bytes"] == measured["gradient_bytes"] == 4 * params
    assert measured["optimizer_state_total_bytes"] == state_count * 4 * params
    steps = measured["optimizer_step_bytes"]
    assert steps == (4 * measured["parameter_tensors"] if state_count == 2 else 0)


def test_tied_embedding_counts_once():
    """GPT-2 ties lm_head to wte: one storage, counted once."""
    from builder.model import from_hf_config, param_count
    from builder.validate.cases import hf_config

    case = StateCase(family="gpt2", optimizer="sgd-momentum")
    measured = states(case)
    expected = param_count(from_hf_config(hf_config(case.activation_case(), 2)))
    assert measured["params"] == expected == 120576
    assert measured["parameter_bytes"] == 4 * expected


def test_lora_freezes_the_base():
    """LoRA r=4 on q,k,v,o of 2 layers: adapters r*(in+out) each, fp32; no gradient on frozen weights."""
    measured = states(StateCase(family="llama", optimizer="adamw", dtype="bfloat16", kv_heads=2, lora_rank=4))
    adapters = 2 * 4 * ((64 + 64) + (64 + 32) + (64 + 32) + (64 + 64))  # q, k, v (kv2 x d16 = 32), o
    assert measured["trainable_params"] == adapters == 3584
    assert measured["frozen_with_gradient"] == 0
    assert measured["gradient_bytes"] == 4 * adapters
    assert measured["parameter_bytes"] == 2 * 125248 + 4 * adapters


# Large shapes and sharding -------------------------------------------------------------------

def test_fake_tensors_count_a_real_layer_without_memory():
    """Llama-2-7B layer, b=1 s=4096 bf16 full recompute: the layer input, 1*4096*4096*2 bytes."""
    from builder.validate.large import measure_large_case

    case = ActivationCase(family="llama", attention="sdpa", dtype="bfloat16", batch=1, seq_len=4096, hidden=4096,
                          heads=32, kv_heads=32, ffn=11008, vocab=32000, recompute="full")
    assert measure_large_case("llama-2-7b", case)["per_layer"]["activation_storage_bytes"] == 33554432


def test_fsdp2_shards_model_states_by_world_size():
    """FSDP2 on 8 fake ranks: every dim 0 divides, so each rank holds exactly 1/8 of each state."""
    from builder.validate.sharding import ShardCase, measure_shard_case

    measured = measure_shard_case(ShardCase(family="llama", world_size=8, rank=7, kv_heads=2))["measured"]
    assert measured["parameter_bytes"] == measured["gradient_bytes"] == 4 * 125248 // 8
    assert measured["optimizer_state_total_bytes"] == 2 * 4 * 125248 // 8


def test_cpu_meter_sees_every_allocation_of_a_phase():
    """Inside a phase: 4 MiB and 8 MiB live together (12 MiB over what was live before), then the 8 MiB
    freed and 2 MiB allocated; the peak is the 12 MiB moment, measured from the allocator's events."""
    from builder.validate.peak import CpuMeter

    with CpuMeter() as meter:
        before = torch.empty(1 << 20, dtype=torch.uint8)  # 1 MiB live before the phase
        with meter.phase("forward", measured=True):
            a = torch.empty(4 << 20, dtype=torch.uint8)
            b = torch.empty(8 << 20, dtype=torch.uint8)
            del b
            c = torch.empty(2 << 20, dtype=torch.uint8)
        with meter.phase("backward", measured=False):
            d = torch.empty(64 << 20, dtype=torch.uint8)  # not measured
    del a, c, d, before
    assert meter.peaks == {"forward": (1 + 4 + 8) << 20}


def test_peak_phase_of_a_real_step_is_measured_and_predicted():
    """The smallest peak case: every phase's measured peak within 3% of builder.model.peak."""
    from builder.validate.compare import compare_peak_case
    from builder.validate.peak import measure_peak_case

    case = [c for c in peak_cases(small=True) if "gpt2" in c.name and "b1-s16" in c.name][0]
    result = measure_peak_case(case)
    assert result["measured"]["peak_phase"] == "backward"  # the tied embedding's gradients at the end
    rows = compare_peak_case("peak.json", result)
    assert [row.quantity for row in rows] == ["peak_forward", "peak_backward", "peak_optimizer_step"]
    assert all(row.status == "ok" for row in rows), rows


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_every_rmsnorm_backward_instant_is_measured_node_by_node(dtype):
    """A two-layer Llama (h256, 8 heads, 4 KV, ffn 256, V512), one 64-token sequence: the peak live bytes inside each
    PowBackward0 of the measured backward (the final norm's, then each layer's post-attention and input norms', last
    layer first) are the model's instants (builder.model.peak.instants) to 136 B, in fp32 (where the normalising
    product's gradient of an fp32 input joins the residual stream's: four fp32 temporaries) and in bf16 (five).
    Measured on CPU with the harness's profiler memory events: fp32 11,043,464, 11,371,912, 11,763,848, 12,092,296,
    12,467,848 B; bf16 5,852,296, 6,016,392, 6,178,440, 6,309,768, 6,463,624 B."""
    from builder.model.peak import instants
    from builder.validate.cases import PEAK_LLAMA, PeakCase
    from builder.validate.compare import peak_config
    from builder.validate.peak import measure_peak_case

    case = PeakCase(PEAK_LLAMA.with_changes(dtype=dtype, batch=1, seq_len=64, ffn=256, vocab=512),
                    optimizer="sgd-momentum")
    result = measure_peak_case(case, nodes=("PowBackward0",))
    measured = [peak for _, peak in result["measured"]["nodes"]]
    config = peak_config(result["inputs"], result["hf_config"], result["name"])
    norm = "the {0} RMSNorm's backward (its pow)"
    predicted = [instants(config, "final_norm_backward")[norm.format("final norm")],
                 *(instants(config, phase)[norm.format(name)] for phase in ("layer_backward", "first_layer_backward")
                   for name in ("post_attention_layernorm", "input_layernorm"))]
    assert len(measured) == 5
    assert all(abs(p - m) <= 136 for p, m in zip(predicted, measured)), (predicted, measured)


def test_gpu_flag_without_cuda_is_a_clear_error(capsys):
    """No CUDA device: exit 2 and one line naming the flag (the GPU run needs a GPU)."""
    from builder.validate.cli import main

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert main(["--gpu"]) == 2
    assert capsys.readouterr().err.startswith("error: --gpu: no CUDA device")


def test_only_names_the_unknown_kind(capsys):
    from builder.validate.cli import main

    assert main(["--only", "peaks"]) == 2
    assert "--only: unknown kind 'peaks'" in capsys.readouterr().err


# CLI --------------------------------------------------------------------------------------

def test_missing_torch_gives_the_install_hint(monkeypatch, capsys):
    """Without torch, validate exits 2 with the one-line hint."""
    from builder.validate.cli import main

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingExtra, match="validate"):
        require_torch()
    assert main(["--small"]) == 2
    assert MISSING_EXTRA in capsys.readouterr().err


# The --small comparison against the model --------------------------------------------------

# Cases the model does not support yet (xfail strict: the test flips to a failure once they
# are supported, and the entry must then be removed). Empty: the model answers every case.
UNSUPPORTED: set[str] = set()


@pytest.fixture(scope="module")
def small_rows():
    """Measure the --small set once and compare it with the model."""
    from builder.validate.compare import compare_documents
    from builder.validate.suite import measure_suite

    return compare_documents(measure_suite(small=True))


def small_case_names() -> list[str]:
    """Names of every --small case (known without torch)."""
    from builder.validate.large import large_cases
    from builder.validate.sharding import shard_cases

    names = [case.name for case in small_activation_cases()] + [case.name for case in state_cases()]
    names += [case.name for _, case in large_cases(small=True)]
    names += [case.name for case in shard_cases(small=True) if case.rank == 0]
    names += [case.name for case in peak_cases(small=True)]
    return sorted(set(names))


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason="not supported by the model yet"))
    if name in UNSUPPORTED else name
    for name in small_case_names()
])
def test_small_case_within_tolerance(small_rows, name):
    """Model states byte-exact, per-layer activations within 2%, the rest within 5%."""
    rows = [row for row in small_rows if row.case == name]
    assert rows, f"{name} was not measured"
    failing = [f"{row.quantity}: measured {row.measured}, predicted {row.predicted} "
               f"({row.status}{', ' + row.note if row.note else ''})" for row in rows if row.status != "ok"]
    assert not failing, "; ".join(failing)


def test_cuda_meter_keeps_each_phases_largest_peak_and_the_context(monkeypatch):
    """The GPU path's bookkeeping, with torch.cuda's allocator statistics played by a fake: peaks are
    reset before each phase, the largest over repeats is kept, and the context is the device memory in
    use before torch reserves any (no GPU needed; the measurement itself needs one)."""
    from builder.validate.peak import CudaMeter

    state = {"allocated": 0, "peak": 0, "reserved": 0}

    def allocate(n):
        state["allocated"] += n
        state["peak"] = max(state["peak"], state["allocated"])
        state["reserved"] = max(state["reserved"], state["allocated"] + 1000)

    fake = {"init": lambda: None, "synchronize": lambda: None,
            "mem_get_info": lambda: (80_000 - 600, 80_000), "memory_reserved": lambda: 0,
            "reset_peak_memory_stats": lambda: state.update(peak=state["allocated"]),
            "max_memory_allocated": lambda: state["peak"], "max_memory_reserved": lambda: state["reserved"]}
    for name, function in fake.items():
        monkeypatch.setattr(torch.cuda, name, function)
    with CudaMeter() as meter:
        for size in (300, 500):  # two micro-batches: the forward peak is the larger
            with meter.phase("forward", measured=True):
                allocate(size)
                allocate(-size)
        with meter.phase("backward", measured=False):
            allocate(10_000)  # not measured
    assert meter.context_bytes == 600
    assert meter.peaks == {"forward": 500} and meter.reserved == {"forward": 1_500}
