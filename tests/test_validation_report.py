"""The Validation page's report: every committed case compared with the model at build time,
and a case outside tolerance shown, never hidden (issue 5)."""

import copy

from builder.validate.compare import compare_documents
from builder.widgets.validation import context, load_documents


def test_report_covers_every_committed_case_within_tolerance():
    documents = load_documents()
    rows = compare_documents(documents)
    report = context({}, {})
    assert report["summary"]["total"] == len(rows) > 300
    assert report["summary"]["within"] == sum(r.status == "ok" for r in rows)
    assert sum(len(g["rows"]) for g in report["groups"]) == len(rows)
    assert report["environment"]["torch"].startswith("2.13.0")
    assert report["svg"].count("<circle") + report["svg"].count("<rect") + report["svg"].count("<path") > len(rows)


def test_a_case_outside_tolerance_is_listed_and_ringed():
    documents = copy.deepcopy(load_documents())
    case = documents["model_states.json"]["cases"][0]
    case["measured"]["gradient_bytes"] += 1  # one byte off: states must be byte-exact
    report = context({}, {}, documents)
    assert report["summary"]["within"] == report["summary"]["total"] - 1
    assert [row["case"] for row in report["outside"]] == [case["name"]]
    assert report["outside"][0]["verdict"] == "OUTSIDE tolerance"
    assert 'r="7" fill="none"' in report["svg"]  # the ring that marks a miss


def test_the_report_reads_the_content_folder_it_is_given(tmp_path):
    """`build --content DIR` reports DIR/validation/, not the repository's content/validation/."""
    import shutil

    from builder.validate.results import VALIDATION_DIR

    shutil.copy(VALIDATION_DIR / "peak.json", tmp_path / "peak.json")
    report = context({}, {"validation_dir": tmp_path})
    expected = compare_documents({"peak.json": load_documents(VALIDATION_DIR)["peak.json"]})
    assert report["summary"]["total"] == len(expected) == 3 * len(load_documents(tmp_path)["peak.json"]["cases"])
    assert [group["title"] for group in report["groups"]] == ["Peak of a real training step, by phase (CPU allocator)"]


def test_saved_activations_is_the_estimates_activation_bytes():
    """saved_activations prices a one-stage training run from the 'activations/' rules alone: the same number as the
    whole estimate's, with the activations offloaded, recomputed, autocast, and where pipeline stages make it fall
    back to the whole estimate."""
    from builder.catalog import default_models
    from builder.model import Config, estimate
    from builder.model.estimator import saved_activations

    models = default_models()
    base = Config(model=models["llama-3-8b"], mode="train", precision="bf16", micro_batch=2, seq_len=512)
    for config in (base, base.with_changes(offload_activations=True), base.with_changes(recompute="full"),
                   base.with_changes(precision="amp-bf16"), base.with_changes(pp=2, grad_accum=4),
                   base.with_changes(model=models["gpt2"], dropout=True, attention="eager")):
        assert saved_activations(config) == estimate(config, words=False).get("activations", default=None,
                                                                              transient=False)
