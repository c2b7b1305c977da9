"""Numbers in the pages' prose come from the model: the {{< estimate "FLAGS" FIELD >}} shortcode (builder/prose_numbers.py)
reads what `python -m builder estimate FLAGS --json` prints, through the command's own parser and model, at build
time. Its parsing, its formatting and its errors (file:line), a page that uses it, the build's memo and the
incremental rebuild; then the content: no page types a model result where the shortcode could write it (a heuristic
that flags "the model gives N GiB"), and the model results the shortcode cannot write (a quotient of a part by the
layers, a count no --json field holds) are pinned to the model here, one by one."""

from __future__ import annotations

import io
import json
import re
import shutil
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from builder import prose_numbers
from builder.build import BuildFailed, SitePaths, build_site, hash_tree, input_digests
from builder.catalog import default_gpus, default_models
from builder.cli import main
from builder.content import read_page
from builder.incremental import BuildMemory
from builder.model import Config
from builder.model.activations import LAYER_GROUPS
from builder.model.architecture import layer_param_groups, param_groups
from builder.model.engines import EngineSettings, engine_report
from builder.model.peak import assess
from builder.render import PageContext, make_markdown, make_templates, render_body
from tests.page_text import CONTENT, answer, page_text
from tests.test_build import FIXTURE, TEMPLATES, fake_chart

ROOT = Path(__file__).resolve().parents[1]
MODELS, GPUS = default_models(), default_gpus()
GIB = 2**30
QWEN = "--model qwen3-14b --mode serve --engine vllm --gpu h100-80gb --max-num-seqs 16 --max max-model-len"


def cli_json(flags: str) -> dict:
    """What `python -m builder estimate FLAGS --json` prints, read back."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["estimate", *flags.split(), "--json"]) == 0
    return json.loads(out.getvalue())


def number(body: str) -> str:
    return prose_numbers.number(body, answer)


# The shortcode -------------------------------------------------------------------------

def test_the_shortcode_is_the_command_lines_answer():
    """One code path: the number is the field of the JSON the command prints for the same flags (the Serving page's
    example, --max max-model-len with 16 requests: 17,872 tokens when this test was written)."""
    value = cli_json(QWEN)["max"]["value"]
    assert number(f'"{QWEN}" max.value') == f"{value:,}"
    # Without --gpu the answer has no verdicts (a page's number reads no GPU it does not name); the rest is the same.
    plain = cli_json("--params 7e9")
    assert answer("--params 7e9") == plain | {"fits": {}} and len(plain["fits"]) == len(GPUS)
    # Flags may wrap over lines; the memo sees them as one line.
    assert number('"' + QWEN.replace(" --gpu", "\n  --gpu") + '" max.value') == f"{value:,}"


def test_bytes_are_gib_with_two_decimals_and_counts_have_separators():
    """7e9 parameters in fp32 with Adam: 16 bytes each, 112e9 bytes = 104.31 GiB = 112.0 GB (the Model states page's
    "7B, fp32, Adam: 112 GB")."""
    flags = '"--params 7e9 --precision fp32 --optimizer adam"'
    assert number(f"{flags} per_gpu_bytes") == "104.31 GiB"
    assert number(f"{flags} per_gpu_bytes unit=GB digits=1") == "112.0 GB"
    assert number(f"{flags} per_gpu_bytes unit=bytes") == "112,000,000,000 bytes"
    assert number(f"{flags} per_gpu_bytes unit=MiB digits=0") == "106,812 MiB"
    assert number(f"{flags} per_gpu_bytes bare=true") == "104.31"
    assert number(f"{flags} params") == "7,000,000,000"
    assert number(f"{flags} parts.weights") == "26.08 GiB"  # an entry of parts is bytes
    # Sums, and a prefix: weights 4 + gradients 4 + Adam's moments 4 + 4 bytes a parameter.
    assert number(f"{flags} parts.weights+parts.gradients+parts.optimizer* unit=GB digits=0") == "112 GB"
    assert number(f"{flags} parts.weights+parts.gradients+parts.optimizer* per=params") == "16.00"
    # Against a published figure: the difference in percent of that figure.
    assert number(f"{flags} per_gpu_bytes unit=GB against=100GB") == "12.0% more"
    assert number(f"{flags} per_gpu_bytes against=112.7GB") == "0.6% less"
    assert number(f"{flags} per_gpu_bytes against=112GB") == "the same"
    assert number(f"{flags} params against=8e9 digits=0") == "12% less"
    # A number that is not whole keeps two decimals (vLLM's concurrency, the Gemma 3 1B log's 461.21x).
    gemma = ("--model gemma-3-1b --mode serve --engine vllm --gpu h100-80gb --max-model-len 2048 "
             "--max-num-batched-tokens 8192 --kv-cache-memory 25.39GiB")
    assert number(f'"{gemma}" max_concurrency') == f"{cli_json(gemma)['max_concurrency']:.2f}" == "461.19"


@pytest.mark.parametrize("body, message", [
    ('--params 7e9 need_bytes', "the flags come first, in double quotes"),
    ('"--params 7e9"', "no field after the flags"),
    ('"--params 7e9" need_bytes units=GB', "unknown option 'units' (known: unit, digits, bare, per, against)"),
    ('"--params 7e9" need_bytes unit=GB unit=GiB', "option 'unit' given twice"),
    ('"--params 7e9" need_bytes GB', "cannot read option 'GB' (write key=value)"),
    ('"--params 7e9 --bogus" need_bytes', 'estimate "--params 7e9 --bogus": unrecognized arguments: --bogus'),
    ('"--model nope" need_bytes', "argument --model: unknown model 'nope'"),
    ('"--params 7e9 --help" need_bytes', "argument --help: prints the help, not an estimate"),
    ('"--config x.json" need_bytes', "argument --config: a page's numbers come from the catalogs"),
    ('"--params 7e9" nope.value', "no 'nope' in the answer (there are: params, per_gpu_bytes, sum_of_parts_bytes, need_bytes"),
    ('"--params 7e9" parts.kv*', "no key of 'parts' starts with 'kv' (there are: weights"),
    ('"--params 7e9" need_basis', "'need_basis' is 'peak of a step, at the optimizer step', not a number"),
    ('"--params 7e9" params.x', "'params' is a value, not a group of fields"),
    ('"--params 7e9" params+need_bytes', "adds bytes to a count"),
    ('"--params 7e9" params unit=GB', "option unit=GB: the field is not bytes"),
    ('"--params 7e9" need_bytes unit=TB', "option unit=TB: use GiB, GB, MiB, KiB, bytes"),
    ('"--params 7e9" need_bytes digits=two', "option digits must be a whole number from 0 to 9"),
    ('"--params 7e9" need_bytes against=lots', "option against: 'lots' is not a size such as 58.11GiB"),
    ('"--params 7e9" need_bytes per=params unit=GB', "option per writes a plain ratio"),
    # A configuration the engine refuses to start, in the engine's own words (vLLM's check_enough_kv_cache_memory).
    ('"--model llama-3.1-8b --mode serve --engine vllm --gpu rtx-4090" kv_cache_bytes',
     "argument --engine: the engine would refuse this run"),
])
def test_bad_shortcodes_say_what_is_wrong(body, message):
    with pytest.raises(ValueError) as error:
        number(body)
    assert message in str(error.value)


def render(tmp_path: Path, body: str) -> tuple[str, list[str]]:
    """A page of `body` (front matter of 6 lines: the body starts at line 7) checked and rendered."""
    path = tmp_path / "t.md"
    path.write_text("---\ntitle: T\nslug: t\norder: 1\nsummary: S\n---\n" + body, encoding="utf-8")
    page, errors = read_page(path, "content/t.md")
    assert not errors
    context = PageContext(page=page, charts={}, references={}, templates=make_templates(TEMPLATES),
                          catalogs={"model": MODELS, "gpu": GPUS})
    html = render_body(make_markdown(), context)
    return html, [str(error) for error in context.errors]


def test_a_page_renders_the_models_number_in_prose_and_tables(tmp_path):
    value = cli_json(QWEN)["max"]["value"]
    html, errors = render(tmp_path, f'The answer is {{{{< estimate "{QWEN}" max.value >}}}} tokens.\n\n'
                                    '{{< estimate "--params 7e9 --precision fp32 --optimizer adam" per_gpu_bytes >}} '
                                    'starts a line and is still prose.\n\n'
                                    '| Run | GiB |\n|---|---|\n'
                                    '| 7B | {{< estimate "--params 7e9 --precision fp32 --optimizer adam" '
                                    'per_gpu_bytes bare=true >}} |\n\n'
                                    '`{{< estimate "a code span" is not one >}}`\n')
    assert errors == []
    assert f"<p>The answer is {value:,} tokens.</p>" in html
    assert "<p>104.31 GiB starts a line and is still prose.</p>" in html
    assert '<td class="num">104.31</td>' in html  # a computed cell aligns as a number
    assert "<code>{{&lt; estimate &quot;a code span&quot; is not one &gt;}}</code>" in html


def test_errors_name_the_file_and_line(tmp_path):
    _, errors = render(tmp_path, 'First line {{< estimate "--params 7e9\n--bogus" need_bytes >}} wraps,\n'
                                 'so this is line 9: {{< estimate "--params 7e9" nope >}}.\n\n'
                                 '| a |\n|---|\n| {{< estimate "--model nope" params >}} |\n\n'
                                 'Unclosed {{< estimate "--params 7e9" params\n')
    assert errors == [
        'content/t.md:7: estimate "--params 7e9 --bogus": unrecognized arguments: --bogus',
        "content/t.md:9: estimate \"--params 7e9\" nope: no 'nope' in the answer (there are: params, per_gpu_bytes, "
        "sum_of_parts_bytes, need_bytes, need_basis, parts, host_bytes, host_parts, fits, sources, notes, peak_bytes, peak_phase)",
        "content/t.md:13: estimate \"--model nope\": argument --model: unknown model 'nope' (see `python -m builder "
        "models`)",
        "content/t.md:15: an estimate shortcode needs its closing '>}}': write {{< estimate \"FLAGS\" FIELD "
        "key=value ... >}}"]


# The build ------------------------------------------------------------------------------

NUMBERS = """---
title: Numbers
slug: numbers
order: 3
summary: Prose numbers.
---
GPT-2 at 1,024 tokens needs {{< estimate "--model gpt2 --seq-len 1024" need_bytes >}}, and again
{{< estimate "--model gpt2 --seq-len 1024" need_bytes unit=GB >}}; it leaves
{{< estimate "--model gpt2 --seq-len 1024 --gpu a100-80gb" fits.a100-80gb.headroom_bytes >}} on an A100.
"""


def make_site(folder: Path) -> SitePaths:
    shutil.copytree(FIXTURE / "content", folder / "content")
    shutil.copytree(FIXTURE / "static", folder / "static")
    shutil.copytree(TEMPLATES, folder / "templates")
    (folder / "content" / "numbers.md").write_text(NUMBERS, encoding="utf-8")
    return SitePaths(folder / "content", folder / "templates", folder / "static", folder / "site")


def build(paths: SitePaths, memory: BuildMemory | None = None):
    return build_site(paths, quiet=True, force=memory is None, render_chart=fake_chart, memory=memory)


def test_a_build_evaluates_identical_flags_once_and_fails_on_a_bad_one(tmp_path, monkeypatch):
    paths = make_site(tmp_path)
    calls: list[str] = []
    evaluate = prose_numbers.evaluate
    monkeypatch.setattr(prose_numbers, "evaluate", lambda flags, catalogs: calls.append(flags) or evaluate(flags, catalogs))
    build(paths)
    assert sorted(calls) == ["--model gpt2 --seq-len 1024", "--model gpt2 --seq-len 1024 --gpu a100-80gb"]
    page = " ".join((paths.out / "numbers.html").read_text(encoding="utf-8").split())
    need = cli_json("--model gpt2 --seq-len 1024")["need_bytes"]
    assert f"needs {need / GIB:.2f} GiB, and again {need / 1e9:.2f} GB;" in page
    # A refused flag fails the build, naming the page's file and line, and the site stays as it was.
    before = hash_tree(paths.out)
    numbers = paths.content / "numbers.md"
    numbers.write_text(NUMBERS.replace("--gpu a100-80gb", "--gpu a100-81gb"), encoding="utf-8")
    with pytest.raises(BuildFailed) as failure:
        build(paths)
    assert [str(error) for error in failure.value.errors] == [
        f'{numbers}:9: estimate "--model gpt2 --seq-len 1024 --gpu a100-81gb": argument --gpu: \'a100-81gb\' is neither a catalog '
        "GPU (see `python -m builder gpus`) nor a size with its unit such as 80GiB or 80GB (a bare number is refused)"]
    assert hash_tree(paths.out) == before


def test_an_incremental_build_follows_the_catalog_entries_a_number_reads(tmp_path):
    """The page's numbers read the A100's entry and GPT-2's (builder/catalog_reads.py): an edit to the A100's memory
    renders that page again with the new number, the same site as a clean build; an edit to Llama 3 8B's name, which
    no number reads, leaves it as it was. The builder's code (the model's included) is in every page's key
    (builder/incremental.py shared_key), so an edit to the model renders every page and evaluates every number."""
    paths = make_site(tmp_path / "a")
    assert "builder/model/estimator.py" in input_digests(paths)  # in the shared key of every page
    memory = BuildMemory()
    build(paths, memory)
    numbers = str(paths.content / "numbers.md")
    # Only the GPU a number names: without --gpu a shortcode's answer has no verdicts, so it walks no GPU catalog.
    assert {("gpu", "a100-80gb"), ("model", "gpt2")} <= set(memory.pages[numbers].reads)
    assert [entry for catalog, entry in memory.pages[numbers].reads if catalog == "gpu"] == ["a100-80gb"]
    gpus = paths.content / "gpus.toml"
    text = gpus.read_text(encoding="utf-8")
    usable = int(re.search(r'\[a100-80gb\][^\[]*?usable_bytes = ([\d_]+)', text).group(1).replace("_", ""))
    gpus.write_text(text.replace(f"usable_bytes = {usable:_}", f"usable_bytes = {usable - GIB:_}", 1)
                    if f"usable_bytes = {usable:_}" in text else
                    text.replace(f"usable_bytes = {usable}", f"usable_bytes = {usable - GIB}", 1), encoding="utf-8")
    assert numbers in build(paths, memory).rendered
    headroom = (usable - GIB - cli_json("--model gpt2 --seq-len 1024")["need_bytes"]) / GIB
    assert f"leaves {headroom:.2f} GiB on an A100" in " ".join((paths.out / "numbers.html").read_text().split())
    clean = make_site(tmp_path / "b")
    shutil.copy(gpus, clean.content / "gpus.toml")
    build(clean)
    assert hash_tree(paths.out) == hash_tree(clean.out)
    models = paths.content / "models.toml"
    models.write_text(models.read_text(encoding="utf-8").replace('display = "Llama 3 8B"', 'display = "Llama 3 8B (M)"'),
                      encoding="utf-8")
    assert numbers not in build(paths, memory).rendered


# The content ------------------------------------------------------------------------------

# "the model gives", "the model's need is", "`python -m builder estimate ...` gives": a clause that states what the
# model or the command line answers. A number with a unit typed in it, before any word that names a source (a log,
# a README, a paper: their figures are typed, with a citation), is a model result the shortcode should write.
TRIGGER = re.compile(r"(?:\b[Tt]he model(?:'s)?|\b[Tt]he command(?: line)?|`python -m builder estimate[^`]*`)"
                     r"(?P<words>(?:\s+[\w'-]+){0,4}?)\s+(?:gives?|needs?|prints?|counts?|puts|keeps?|reports?|"
                     r"holds?|lands on|is|are)\b")
TYPED = re.compile(r"(?<![\w.,])(?P<value>\d[\d,]*(?:\.\d+)?)\s?(?P<unit>GiB|GB|MiB|KiB|tokens|bytes|%|x)(?!\w)")
SOURCE = re.compile(r"\b(?:logs?|logged|README|published|paper|guide|documentation|measured|against|within|where|than)\b")
LIMIT = re.compile(r"\b(?:up to|at most|at least|under|over|above|below)\s*$")
# Model results the shortcode cannot write, pinned below (test_typed_model_results_are_the_models).
# The torchtune section's figures (the 3B rows' difference, its table) are pinned by
# tests/test_lora_torchtune_model.py test_the_page_quotes_the_model; the 405B QLoRA row's percentage by
# tests/test_qlora_fsdp.py test_the_page_says_what_the_model_counts.
PINNED = {("fine-tuning.md", "0.17 %"), ("fine-tuning.md", "3.90 GiB"), ("fine-tuning.md", "8.9%")}


def typed_model_results(text: str) -> list[tuple[int, str]]:
    """(line, number) of each typed number the heuristic takes for a model result (shortcodes are not typed)."""
    text = prose_numbers.SHORTCODE.sub(lambda match: "N" + "\n" * match.group(0).count("\n"), text)
    found = []
    for match in TRIGGER.finditer(text):
        if re.search(r"\b(?:not|no)\b", match.group("words")):
            continue
        rest = text[match.end():]
        end = re.search(r"[.;:](?:\s|$)", rest)
        clause = rest[:end.start() if end else len(rest)]
        source = SOURCE.search(clause)
        clause = clause[:source.start() if source else len(clause)]
        for typed in TYPED.finditer(clause):
            value, unit = typed.group("value"), typed.group("unit")
            if unit == "bytes" and "," not in value and float(value) <= 64:
                continue  # a rule per element, such as "one fp32 row (4 bytes)"
            if LIMIT.search(clause[:typed.start()]):
                continue  # a limit, such as "a prefill chunk of up to 8192 tokens"
            found.append((text.count("\n", 0, match.end() + typed.start()) + 1, typed.group(0)))
    return found


def test_the_heuristic_flags_what_the_pages_used_to_type():
    """The Serving page's example read "gives 18,048 tokens" for weeks after the model moved to 17,872; these
    sentences (as they were typed before the shortcode) are flagged, the published figures beside them are not."""
    flagged = typed_model_results(
        "For example, `python -m builder estimate --model\nqwen3-14b --mode serve --engine vllm --gpu h100-80gb "
        "--max-num-seqs 16 --max max-model-len`\ngives 18,048 tokens. "
        "For the same settings the model gives 58.73 GiB, 1.1% more. "
        "torchtune's README prints 13.9 GiB per GPU for this run; the model gives 13.81 GiB, 0.6% below. "
        "The model gives the logged 992,896 tokens exactly. "
        "The KV cache part is what vLLM's line reports: the model gives {{< estimate \"--params 1e9\" need_bytes >}} "
        "against the log's 36.88 GiB. The model does not count tensors under 10 MiB. "
        "The model counts one fp32 row (4 bytes).")
    assert [number for _, number in flagged] == ["18,048 tokens", "58.73 GiB", "1.1%", "13.81 GiB", "0.6%"]
    assert [line for line, _ in flagged] == [3, 3, 3, 3, 3]


def test_no_page_types_a_model_result_the_shortcode_could_write():
    found = [f"content/{path.name}:{line}: {number}" for path in sorted(CONTENT.glob("*.md"))
             for line, number in typed_model_results(path.read_text(encoding="utf-8"))
             if (path.name, number) not in PINNED]
    assert found == [], ("write these with {{< estimate \"FLAGS\" FIELD >}} (docs/AUTHORING.md), or pin them in "
                         "tests/test_prose_numbers.py")


def test_every_shortcode_in_the_content_evaluates():
    """Every page's shortcodes give a number (the build would fail otherwise; this names the shortcode)."""
    for path in sorted(CONTENT.glob("*.md")):
        for match in prose_numbers.SHORTCODE.finditer(path.read_text(encoding="utf-8")):
            assert number(match.group("body")), match.group(0)


def per_layer(config: Config) -> float:
    """The bytes one transformer layer keeps (its saved groups, checkpoint and kept op outputs, over the layers)."""
    names = {f"activations/{group}" for group in LAYER_GROUPS} | {"activations/checkpoint", "activations/op_outputs"}
    return sum(p.bytes for p in assess(config)[0].parts if p.name in names) / config.model.layers


def coefficient(model: str, **settings) -> float:
    """Bytes per token per layer in units of h (the Activations page's table)."""
    # A coefficient per token: 4,096 tokens, or a learned position table's rows where fewer (GPT-2 XL: 1,024).
    tokens = min(4096, MODELS[model].learned_positions or 4096)
    config = Config(model=MODELS[model], seq_len=tokens, micro_batch=1, **settings)
    return per_layer(config) / (tokens * MODELS[model].hidden)


def part(config: Config, name: str) -> int:
    return next(p.bytes for p in assess(config)[0].parts if p.name == name)


def test_typed_model_results_are_the_models():
    """The model results the pages type because no --json field holds them: each, as typed, against the model."""
    activations, serving = page_text("activations.md"), page_text("serving.md")
    # Activations, "Pitfall 2": bytes per token per layer in units of h, SDPA (flash for Megatron), no dropout.
    for row, model, settings, digits in (
            ("Megatron GPT block with dropout (flash)", "gpt2-xl", dict(implementation="megatron", attention="flash",
                                                                        dropout=True), 2),
            ("Llama 3 8B, Megatron op list (flash, no dropout)", "llama-3-8b", dict(implementation="megatron",
                                                                                   attention="flash"), 1),
            ("Llama 2 7B, transformers", "llama-2-7b", dict(implementation="hf", attention="sdpa"), 1),
            ("Llama 3 8B, transformers", "llama-3-8b", dict(implementation="hf", attention="sdpa"), 1),
            ("GPT-2 XL, transformers (GeLU written in Python ops)", "gpt2-xl", dict(implementation="hf",
                                                                                  attention="sdpa"), 1)):
        assert f"| {row} | {coefficient(model, **settings):.{digits}f}" in activations, row
    # Compiled layers: "34 sbh per layer instead of 49 sbh" (Llama 3 8B), "32 sbh instead of 56 sbh" (GPT-2).
    for model, compiled, eager in (("llama-3-8b", 34, 49), ("gpt2", 32, 56)):
        assert round(coefficient(model, attention="sdpa", compile=True)) == compiled
        assert round(coefficient(model, attention="sdpa")) == eager
    # torchtitan's per-op selective checkpointing, Llama 3.1 8B at 2 x 8,192 tokens (tests/test_selective_op.py).
    table_1 = Config(model=MODELS["llama-3.1-8b"], dp=8, fsdp="FULL_SHARD", micro_batch=2, seq_len=8192,
                     attention="sdpa", recompute="selective-op")
    kept = {mode: per_layer(table_1.with_changes(recompute=mode)) for mode in ("selective-op", "full", "none")}
    assert (f"a layer keeps {kept['selective-op'] / GIB:.2f} GiB ({kept['selective-op'] / 16_384:,.0f} bytes a token)"
            in activations)
    assert f"recomputation's {kept['full'] / GIB:.3f} GiB" in activations
    assert f"the {kept['none'] / GIB:.2f} GiB a layer keeps without" in activations
    # A padded batch of Llama 3.2 3B with LoRA (the padded-batches chart), on three pages.
    lora = Config(model=MODELS["llama-3.2-3b"], precision="bf16", optimizer="adamw", seq_len=768, micro_batch=4,
                  lora_rank=32, lora_targets=("q", "v"))
    more = (assess(lora.with_changes(padded=True))[1].bytes - assess(lora)[1].bytes) / GIB
    assert f"{more:.2f} GiB more at the peak of the step" in activations
    assert f"four sequences of 768 tokens, {more:.2f} GiB more" in page_text("fine-tuning.md")
    assert f"mask: {more:.2f} GiB more." in activations
    # Mixtral 8x7B's MoE layer a token, per implementation (Parallelism, "Expert parallelism").
    parallelism = page_text("parallelism.md")
    for implementation, words in (("megatron", "that is {mlp} KiB per token and layer in the MLP plus {router} B in "
                                                "the router, where"),
                                  ("hf", "that is {mlp} KiB per token and layer in the MLP plus {router} B in the "
                                         "router. Each")):
        config = Config(model=MODELS["mixtral-8x7b"], implementation=implementation, attention="flash", seq_len=4096)
        tokens = 4096 * 32
        mlp, router = part(config, "activations/mlp") / tokens, part(config, "activations/router") / tokens
        assert words.format(mlp=round(mlp / 1024), router=round(router)) in parallelism
    # LoRA's trainable parameters and the weights prepare_model_for_kbit_training casts (Fine-tuning).
    fine_tuning = page_text("fine-tuning.md")
    llama = MODELS["llama-3-8b"]
    small = assess(Config(model=llama, lora_rank=16, seq_len=2048))[0]
    large = assess(Config(model=llama, lora_rank=64, lora_targets=("q", "k", "v", "o", "gate", "up", "down"),
                          seq_len=2048))[0]
    assert (f"the model counts {small.trainable_params:,} trainable parameters, "
            f"{100 * small.trainable_params / small.params:.2f} % of the 8.03 billion; with $r = 64$ on all seven "
            f"projections, {large.trainable_params:,}.") in fine_tuning
    groups = param_groups(llama)
    unquantised = groups["embedding/tokens"] + groups["lm_head"] + groups["layers/norms"] + groups["final_norm"]
    assert f"for Llama 3 8B that is {unquantised:,} parameters" in fine_tuning
    assert f"r = 16 on q, k, v, o: {small.trainable_params / 1e6:.1f}M trainable parameters" in fine_tuning
    # Llama 3 8B's linear-layer weights (Model states, fp8 training).
    linear = sum(count for name, count in groups.items() if name.startswith("layers/") and name != "layers/norms")
    assert f"whose linear-layer weights are {linear / 1e9:.2f} of its {small.params / 1e9:.2f} billion" \
        in page_text("model-states.md")
    # vLLM's blocks a request for Gemma 2 9B at --max-model-len 8192 (Serving, "Sliding-window and full layers").
    gemma, h100 = Config(model=MODELS["gemma-2-9b"], mode="serve"), GPUS["h100-80gb"]

    def vllm(**settings):
        return engine_report(gemma, EngineSettings(engine="vllm", max_model_len=8192, **settings), h100.usable_bytes,
                             h100.id).values
    assert f"{vllm()['blocks_per_request']:,} blocks a request instead of 1,024" in serving
    assert f"a request needs {vllm(max_num_batched_tokens=1024)['blocks_per_request']} blocks" in serving
    # Gemma 2 9B without its sliding window: every layer caches all 8,192 tokens.
    full = Config(model=MODELS["gemma-2-9b"].with_changes(sliding_window=None, sliding_window_pattern=0), mode="serve",
                  batch=1, context=8192)
    assert f"instead of {part(full, 'kv_cache') / GIB:.2f} GiB" in serving
    # SGLang's one pool for Gemma 2 9B (not a family is_hybrid_swa_model lists): every layer's K and V a token.
    gemma = default_models()["gemma-2-9b"]
    cell = gemma.layers * 2 * gemma.n_kv_heads * gemma.d_head * 2
    pool = cli_json("--model gemma-2-9b --mode serve --engine sglang --gpu h100-80gb")
    assert pool["kv_cache_bytes"] // cell >= pool["max_total_num_tokens"] > (pool["kv_cache_bytes"] - cell) // cell - 1
    assert (f"{gemma.layers} layers x 2 x {gemma.n_kv_heads} KV heads x {gemma.d_head} x 2 bytes = {cell:,} bytes a "
            "token") in serving
    # What weights and KV cache alone would leave Qwen3-8B's cache on a B200, before SGLang keeps its share back.
    b200 = cli_json("--model qwen3-8b --mode serve --engine sglang --gpu b200")
    per_token = 36 * 2 * 8 * 128 * 2  # layers x (K and V) x KV heads x head dim x bf16 bytes
    left = (b200["gpu_total_bytes"] - sum(b for name, b in b200["parts"].items() if name.startswith("weights")))
    assert f"alone would leave the cache about {left / per_token / 1e6:.2f} million tokens" in serving
    # Llama 3.1 8B on a 24 GB card: what the weights leave vLLM for the KV cache, in its refusal's own words.
    refusal = answer("--model llama-3.1-8b --mode serve --engine vllm --gpu rtx-4090")
    left = float(re.search(r"available KV cache memory \(([\d.]+) GiB\)", refusal).group(1))
    assert round(left) == 6 and "(23.6 GiB usable) the weights leave about 6 GiB" in serving
    assert f"{GPUS['rtx-4090'].usable_bytes / GIB:.1f} GiB usable" in serving
    # One block of Llama 3.1 70B in bf16, FSDP's unit (Sharding, "FSDP units").
    block = sum(layer_param_groups(MODELS["llama-3.1-70b"]).values()) * 2
    assert f"more than a block ({block / GIB:.2f} GiB)" in page_text("sharding.md")
    # "at the end of the backward pass both are" the FSDP number: ZeRO-3's states then are the same bytes.
    for flags in ("--fsdp FULL_SHARD", "--zero 3"):
        end = cli_json(f"--model llama-3-8b --dp 8 {flags} --seq-len 4096 --phases")["phases"]["backward_end"]["parts"]
        kept = sum(b for name, b in end.items() if name.split("/")[0] in ("weights", "gradients", "optimizer"))
        assert f"at the end of the backward pass both are {kept / GIB:.2f} GiB" in page_text("sharding.md")
    # DeepSpeed ZeRO-2's flat 16-bit copy of the gradient partition at the step, 2,851 million parameters on 8 GPUs.
    step = cli_json("--params 2851e6 --zero 2 --dp 8 --phases")["phases"]["optimizer_step"]["parts"]
    assert f"makes before its cast ({step['gradients'] / GIB:.2f} GiB" in page_text("sharding.md")
