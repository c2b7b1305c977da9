"""Exercises answered by the model, takeaways, the student edition and the Notation page (issue 16)."""

from __future__ import annotations

import dataclasses
import html
import re
import shutil
from pathlib import Path

import pytest

from builder import cli_site
from builder.build import SitePaths, build_site, gather_content
from builder.catalog import load_gpus, load_models
from builder.content import read_pages
from builder.exercises import answer, evaluate_page_exercises
from builder.model import Config, estimate
from builder.model.notation import SYMBOLS, lookup
from builder.symbols import anchor, symbols_in
from tests.html_tags import document
from tests.test_build import fake_chart

ROOT = Path(__file__).resolve().parent.parent
CONTENT = ROOT / "content"
# Pages that are not topics: no takeaways or exercises asked of them.
NOT_TOPICS = {"index", "calculator", "validation", "references", "exercises", "notation", "what-changed"}
MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+)\$", re.S)


@pytest.fixture(scope="module")
def gathered():
    """Every content file, read and validated."""
    paths = SitePaths(content=CONTENT, templates=ROOT / "templates", static=ROOT / "static", out=ROOT / "unused")
    result, errors = gather_content(paths)
    assert errors == []
    return result


def page_exercises(gathered, slug: str):
    """The answered exercises of one page."""
    page = next(p for p in gathered.pages if p.slug == slug)
    answered, errors = evaluate_page_exercises(page, gathered.presets | page.presets, gathered.models, gathered.gpus)
    assert errors == []
    return page, answered


# Answers equal published numbers ---------------------------------------------------------

@pytest.mark.parametrize("zero, published_gb", [(0, 120), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_model_states_answer_matches_zero_paper_figure_1(zero, published_gb):
    # Rajbhandari et al. 2019, "ZeRO", arXiv:1910.02054, Figure 1: Psi = 7.5B, N_d = 64, K = 12 (mixed-precision
    # Adam): baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB (exactly 1.875 GB) per GPU.
    config = Config(params=7_500_000_000, precision="bf16-mixed", optimizer="adam", zero=zero, dp=64)
    value, text, _ = answer("model-states", config, None, "GB")
    assert round(value / 1e9, 1) == published_gb
    if zero == 3:
        assert value == 1_875_000_000 and text.startswith("1.88 GB (1.75 GiB")


@pytest.mark.parametrize("precision, optimizer, per_param", [
    ("bf16-mixed", "adam", 16),  # ZeRO, arXiv:1910.02054, section 3.1: 2 + 2 + 12 bytes per parameter
    ("fp32", "adam", 16),  # Transformer Math 101 (Anthony et al. 2023): 7B in fp32 with Adam, 112 GB
    ("megatron-bf16", "adamw", 18),  # Megatron-LM theoretical_memory_usage.py: 18 bytes without dist. optimizer
    ("bf16", "adamw", 8),  # Transformer Math 101: pure bf16, 2 + 2 + 2 + 2
])
def test_bytes_per_parameter_of_published_policies(precision, optimizer, per_param):
    value, _, _ = answer("model-states", Config(params=10**9, precision=precision, optimizer=optimizer), None, "GB")
    assert value == per_param * 10**9


def test_site_exercises_answer_with_the_models_numbers(gathered):
    _, sharding = page_exercises(gathered, "sharding")
    assert sharding["zero-paper-stage3"].value == 1_875_000_000  # ZeRO Figure 1, P_os+g+p: 1.9 GB
    _, states = page_exercises(gathered, "model-states")
    assert states["seven-billion-fp32"].value == 112 * 10**9  # Transformer Math 101: "7B, fp32 Adam, 112 GB"
    llama = gathered.models["llama-3-8b"]
    adam = estimate(Config(model=llama, precision="bf16-mixed", optimizer="adamw", zero=1, dp=8))
    assert states["adam-zero1"].value == adam.get("optimizer")
    _, serving = page_exercises(gathered, "serving")
    # 2 (K and V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes x 16 sequences x 8192 tokens = 16 GiB.
    assert serving["kv-cache-llama-3-8b"].value == 2 * 32 * 8 * 128 * 2 * 16 * 8192 == 16 * 2**30


def test_every_answer_names_its_unit_and_steps_cite_sources(gathered):
    for page in gathered.pages:
        _, answered = page_exercises(gathered, page.slug)
        for exercise in answered.values():
            assert exercise.steps, exercise.exercise_id
            if exercise.answer[0].isdigit():
                assert "GiB" in exercise.answer and "GB" in exercise.answer, exercise.answer
            for step in exercise.steps:
                assert "builder." not in step.text + step.source


def test_changing_the_configuration_changes_the_answer(gathered):
    page, answered = page_exercises(gathered, "model-states")
    exercise = page.exercises["adam-zero1"]
    wider = dataclasses.replace(exercise, bar=dataclasses.replace(
        exercise.bar, settings=exercise.bar.settings | {"dp": 16}))
    changed = dataclasses.replace(page, exercises={"adam-zero1": wider})
    again, errors = evaluate_page_exercises(changed, gathered.presets, gathered.models, gathered.gpus)
    assert errors == []
    assert again["adam-zero1"].value * 2 == answered["adam-zero1"].value  # ZeRO-1 over twice the GPUs: half
    assert again["adam-zero1"].answer != answered["adam-zero1"].answer


def test_fit_answers_name_the_needs_on_either_side():
    models, gpus = load_models(CONTENT / "models.toml"), load_gpus(CONTENT / "gpus.toml")
    config = Config(model=models["llama-3-8b"], mode="serve", precision="bf16", context=8192)
    best, text, steps = answer("max-micro-batch", config, gpus["l4"], "GiB")
    more, _, _ = answer("max-micro-batch", config.with_changes(kv_dtype="fp8"), gpus["l4"], "GiB")
    assert text == f"batch {best}" and more > best  # an fp8 KV cache fits more requests
    assert f"Batch {best}:" in steps[1].text and f"Batch {best + 1}:" in steps[2].text


def test_an_ask_of_several_parts_adds_them_and_names_each():
    """Eager attention saves two parts, the tensors around the kernel and the s x s scores: an ask joined by '+'
    answers with both, each as its own step, and their sum is what the estimate gives for the two."""
    models = load_models(CONTENT / "models.toml")
    config = Config(model=models["llama-3-8b"], seq_len=4096, attention="eager", zero=3, dp=8)
    breakdown = estimate(config)
    value, text, steps = answer("activations/attention + activations/attention_scores", config, None, "GiB")
    parts = breakdown.get("activations/attention"), breakdown.get("activations/attention_scores")
    assert min(parts) > 0 and value == sum(parts) and text.startswith(f"{value / 2**30:,.2f} GiB")
    assert steps[-1].text.startswith("Together (Attention activations and Attention scores): ")
    with pytest.raises(ValueError, match="no memory under 'activations/attention_scores'"):
        answer("activations/attention + activations/attention_scores", config.with_changes(attention="sdpa"), None,
               "GiB")


# Topic pages: takeaways and exercises --------------------------------------------------------

def test_every_topic_page_ends_with_two_exercises_and_has_takeaways():
    pages, errors = read_pages(CONTENT)
    assert errors == []
    topics = [page for page in pages if page.slug not in NOT_TOPICS]
    assert {page.slug for page in topics} >= {"model-states", "activations", "sharding", "parallelism", "serving",
                                              "fine-tuning"}
    for page in topics:
        assert len(page.exercises) >= 2, page.slug
        assert 3 <= len(page.takeaways) <= 5, page.slug
        last_section = page.body.rsplit("\n## ", 1)[1]
        assert last_section.startswith("Exercises\n"), page.slug
        rest = last_section.split("\n", 1)[1]
        assert re.fullmatch(r"(\s*\{\{< exercise [a-z0-9-]+ >\}\}\s*)+", rest), page.slug


# Built site: answers in <details>, the student edition, the collection page -----------------

def build(out: Path, answers: bool) -> Path:
    """The real site with the real model (charts drawn by the test stand-in, which exercises do not use)."""
    build_site(SitePaths(content=CONTENT, templates=ROOT / "templates", static=ROOT / "static", out=out),
               quiet=True, render_chart=fake_chart, answers=answers)
    return out


@pytest.fixture(scope="module")
def editions(tmp_path_factory):
    """The site with answers and the student edition."""
    root = tmp_path_factory.mktemp("editions")
    return build(root / "teacher", True), build(root / "student", False)


def html_files(site: Path) -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(site.glob("*.html"))}


def words(text: str) -> str:
    """`text` with its whitespace collapsed, as a browser shows it (and as the minified page holds it)."""
    return " ".join(text.split())


def test_answers_sit_in_details_readable_without_script(editions, gathered):
    pages = html_files(editions[0])
    _, answered = page_exercises(gathered, "sharding")
    exercise = answered["zero-paper-stage3"]
    section = re.search(r'<section class="exercise" id="exercise-zero-paper-stage3".*?</section>', pages["sharding.html"],
                        re.S).group(0)
    inside = document(section)
    at = [tag for tag, _, _ in inside].index("details")
    assert inside[at][1] == {"class": "exercise-answer"} and inside[at + 1] == ("summary", {}, "Answer")
    assert words(exercise.answer) in words(inside[at][2])
    assert "script" not in [tag for tag, _, _ in inside]
    for name, text in pages.items():  # takeaways box on every topic page
        if name[:-5] not in NOT_TOPICS:
            assert '<aside class="takeaways" aria-labelledby="key-takeaways">' in text, name


def test_student_edition_has_no_answer_text(editions, gathered):
    teacher, student = map(html_files, editions)
    assert "exercise-answer" in teacher["model-states.html"]
    leaked = []
    for page in gathered.pages:
        _, answered = page_exercises(gathered, page.slug)
        for exercise in answered.values():
            texts = [exercise.answer] + [step.text for step in exercise.steps]
            for name, text in student.items():
                shown = words(document(text)[0][2])  # the text of <html>: everything the page holds
                leaked += [(name, t) for t in texts if html.escape(t) in text or html.escape(t, quote=False) in text
                           or words(t) in shown]
    assert leaked == []
    for name, text in student.items():
        assert "<summary>Answer</summary>" not in text and "exercise-answer" not in text, name
        assert text.count('class="exercise"') == teacher[name].count('class="exercise"'), name  # questions stay


def test_exercises_page_collects_every_exercise_with_links_back(editions, gathered):
    collected = html_files(editions[0])["exercises.html"]
    for page in gathered.pages:
        for exercise_id in page.exercises:
            assert f'id="{page.slug}-{exercise_id}"' in collected
            assert f'href="{page.url}#exercise-{exercise_id}"' in collected


def test_builds_are_byte_identical(editions, tmp_path):
    again = build(tmp_path / "student", False)
    assert html_files(again) == html_files(editions[1])


# Bad exercises are content errors ------------------------------------------------------------

def bad_site(tmp_path: Path, exercise: str) -> Path:
    """The real content with one page's exercise replaced by `exercise` (YAML lines)."""
    content = tmp_path / "content"
    shutil.copytree(CONTENT, content)
    page = content / "model-states.md"
    text = page.read_text(encoding="utf-8")
    start = text.index("  adam-zero1:\n")
    end = text.index("  seven-billion-fp32:\n")
    page.write_text(text[:start] + exercise + text[end:], encoding="utf-8")
    return content


@pytest.mark.parametrize("exercise, line_offset, message", [
    ("  adam-zero1:\n    question: Q?\n    ask: optimizer/adam_z\n    config: {model: llama-3-8b}\n", 2,
     "exercise adam-zero1: this configuration has no memory under 'optimizer/adam_z'"),
    ("  adam-zero1:\n    question: Q?\n    ask: optimizer\n    config: {model: llama-3-8b, zero: 7}\n", 3,
     "exercise adam-zero1: front matter `zero`: must be 0, 1, 2 or 3, got 7"),
    ("  adam-zero1:\n    question: Q?\n    ask: max-micro-batch\n    config: {model: llama-3-8b}\n", 2,
     "exercise adam-zero1: ask: max-micro-batch needs a gpu"),
    ("  adam-zero1:\n    question: Q?\n    asked: optimizer\n", 2, "exercise adam-zero1: unknown key 'asked'"),
    ("  adam-zero1:\n    ask: optimizer\n    question: See [@nobody2031].\n    config: {params: 1e9}\n", 2,
     "unknown citation key 'nobody2031'"),
])
def test_a_bad_exercise_is_a_file_line_error_and_the_site_survives(tmp_path, capsys, exercise, line_offset, message):
    content = bad_site(tmp_path, exercise)
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").write_text("previous site", encoding="utf-8")
    status = cli_site.main(["build", "--content", str(content), "--out", str(out), "--quiet"])
    error = capsys.readouterr().err
    first = content.joinpath("model-states.md").read_text().splitlines().index("  adam-zero1:") + 1
    assert status == 2
    assert re.search(rf"model-states\.md:{first + line_offset}: {re.escape(message)}", error), error
    assert (out / "index.html").read_text() == "previous site"


# Notation ---------------------------------------------------------------------------------

def test_every_symbol_a_formula_uses_is_in_the_one_table():
    pages, errors = read_pages(CONTENT)
    assert errors == []
    unknown = []
    for page in pages:
        texts = [page.body] + [text for text, _ in page.takeaways] + [e.question for e in page.exercises.values()]
        for match in MATH.finditer("\n".join(texts)):
            unknown += [(page.path, name) for name in symbols_in(match.group(1) or match.group(2))
                        if lookup(name) is None]
    assert unknown == []
    models = load_models(CONTENT / "models.toml")
    for config in (Config(params=7e9), Config(model=models["llama-3-8b"], tp=2)):
        assert set(estimate(config).where) <= set(SYMBOLS)  # the parts' formulas use the same table


def test_symbols_in_reads_subscripts_and_ignores_words():
    assert symbols_in(r"M_{\text{KV}} = 2 \times L \times k \times d \times \text{bytes}") == ["M_KV", "L", "k", "d"]
    assert symbols_in(r"\underbrace{2\,bsV}_{\text{bf16 logits}} + (2 + K)\,\Psi / N_d") == ["b", "s", "V", "K",
                                                                                              "Psi", "N_d"]


def test_notation_page_lists_every_symbol_and_formulas_link_to_it(editions):
    pages = html_files(editions[0])
    for symbol in SYMBOLS.values():
        assert f'<tr id="{anchor(symbol)}">' in pages["notation.html"], symbol.name
    for name, text in pages.items():
        letters = {symbol.letter for symbol in SYMBOLS.values()}
        for mathml, line in re.findall(r'<div class="math-display">(.*?)</div>\n(<p class="formula-symbols">)?', text,
                                       re.S):
            if set(re.findall(r"<mi>(.)</mi>", mathml)) & letters:  # a formula with a symbol links to Notation
                assert line, (name, mathml[:200])
        for target in re.findall(r'href="notation\.html#([a-z0-9-]+)"', text, re.I):
            assert f'id="{target}"' in pages["notation.html"], (name, target)


def test_a_bad_takeaway_names_its_line(tmp_path, capsys):
    content = tmp_path / "content"
    shutil.copytree(CONTENT, content)
    page = content / "model-states.md"
    lines = page.read_text(encoding="utf-8").splitlines(keepends=True)
    first = lines.index("takeaways:\n") + 2  # the first item's line
    lines[first - 1] = '  - "Cited wrongly [@nobody2031]."\n'
    page.write_text("".join(lines), encoding="utf-8")
    status = cli_site.main(["build", "--content", str(content), "--out", str(tmp_path / "site"), "--quiet"])
    assert status == 2
    assert f"model-states.md:{first}: unknown citation key 'nobody2031'" in capsys.readouterr().err
