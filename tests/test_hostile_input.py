"""Issue 14's hostile-input test: for every option of `estimate` (enumerated from its parser, which the option table
builder/model/options.py makes), every option of the table a chart bar may set in front matter and every key a
calculator link may carry, the values 0, -1, nan, inf, 1e400, an empty string, a long text and a wrong unit
each give one line naming the option (CLI: exit 2 on stderr; build: `path:line: message`, exit 2, the previous site
left as it was), never a traceback or a hang. 0 may be a valid value (a LoRA rank of 0, ZeRO stage 0), so there the
run may also succeed. The CLI gets 100 KB of text (an argument list has a limit), front matter 10 MB.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import pytest

from builder import build as build_module
from builder import cli_site
from builder.build import hash_tree
from builder.cli import main, make_parser
from builder.model.options import FRONT_MATTER_OPTIONS
from tests.test_build import FIXTURE, TEMPLATES, fake_chart

LONG = "x" * 100_000
VALUES = ["0", "-1", "nan", "inf", "1e400", "", LONG, "7 parsecs"]
MAX_LINE = 500  # a message shows a long value by its start only


def estimate_flags() -> list[str]:
    """Every option of `estimate` that takes a value."""
    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    estimate = sub.choices["estimate"]
    return sorted(a.option_strings[-1] for a in estimate._actions
                  if a.option_strings and a.nargs is None and not isinstance(a, (argparse._StoreConstAction,
                                                                                  argparse._HelpAction)))


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def test_the_parser_enumeration_covers_the_model_options():
    flags = estimate_flags()
    assert {"--params", "--micro-batch", "--seq-len", "--lora-rank", "--zero", "--allocator-reserve", "--overhead",
            "--precision", "--kv-dtype", "--gpu"} <= set(flags), flags


@pytest.mark.parametrize("flag", estimate_flags())
def test_every_cli_option_refuses_hostile_values_in_one_line(capsys, flag):
    # GPT-2 on a sequence its 1,024 learned positions hold (the default 2,048 is refused), the flag's value after it.
    base = [] if flag in ("--model", "--params", "--config") else ["--model", "gpt2", "--seq-len", "1024"]
    for value in VALUES:
        code, out, err = run(capsys, ["estimate", *base, f"{flag}={value}"])
        shown = value[:12] or "empty"
        assert "Traceback" not in err, (flag, shown, err[-2000:])
        if value == "0" and code == 0:  # a value 0 may be valid (--lora-rank, --zero, --cuda-context)
            continue
        assert code == 2, (flag, shown, code, out[:300])
        assert err.count("\n") == 1 and len(err) < MAX_LINE, (flag, shown, err[:MAX_LINE])
        assert flag in err, (flag, shown, err)


# Front matter ----------------------------------------------------------------------------------------------------

YAML_VALUES = {"0": "0", "-1": "-1", "nan": ".nan", "inf": ".inf", "1e400": "1.0e+400", "empty": '""',
               "long": "x" * 100_000, "wrong unit": "7 parsecs"}
OPTIONS = sorted(FRONT_MATTER_OPTIONS)  # every option of the table that front matter offers


def page(bars: list[tuple[str, str, str]]) -> tuple[str, dict[str, int]]:
    """An index.md whose chart has one bar per (label, option, YAML value); each bar's option line."""
    lines = ["---", "title: Hostile", "slug: index", "order: 1", "summary: s.", "charts:", "  hostile:",
             "    title: Hostile", "    unit: GiB", "    gpus: [a100-80gb]", "    bars:"]
    where = {}
    for label, option, value in bars:
        lines.append(f"      - label: {label}")
        if option not in ("model", "params"):
            lines.append("        model: gpt2")
            if option != "seq_len":
                lines.append("        seq_len: 1024")  # within GPT-2's learned positions
        lines.append(f"        {option}: {value}")
        where[label] = len(lines)
    lines += ["---", "{{< chart hostile >}}", ""]
    return "\n".join(lines), where


@pytest.fixture
def site(tmp_path, monkeypatch):
    """The fixture content and a built site; returns (content dir, build argv)."""
    monkeypatch.setattr(build_module, "load_chart_renderer", lambda: fake_chart)
    content = tmp_path / "content"
    shutil.copytree(FIXTURE / "content", content)
    for extra in content.glob("*.md"):
        if extra.name != "index.md":
            extra.unlink()
    argv = ["build", "--content", str(content), "--templates", str(TEMPLATES), "--static", str(FIXTURE / "static"),
            "--out", str(tmp_path / "site"), "--quiet"]
    (content / "index.md").write_text(page([("good", "seq_len", "1024")])[0], encoding="utf-8")
    assert cli_site.main(argv) == 0
    return content, argv


def build_errors(content: Path, argv: list[str], text: str, capsys) -> list[str]:
    """Build `text` as index.md; require exit 2, no traceback and the old site kept; the error lines."""
    out = Path(argv[argv.index("--out") + 1])
    before = hash_tree(out)
    capsys.readouterr()
    (content / "index.md").write_text(text, encoding="utf-8")
    assert cli_site.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert hash_tree(out) == before
    lines = err.strip().splitlines()
    assert lines[-1].startswith("build failed: ")
    return lines[:-1]


@pytest.mark.parametrize("name", sorted(YAML_VALUES))
def test_every_front_matter_option_refuses_hostile_values_by_line(site, capsys, name):
    content, argv = site
    text, where = page([(option, option, YAML_VALUES[name]) for option in OPTIONS])
    errors = build_errors(content, argv, text, capsys)
    path = content / "index.md"
    for option in OPTIONS:
        mine = [e for e in errors if e.startswith(f"{path}:{where[option]}: ")]
        if name == "0" and not mine:
            continue  # 0 is a valid value of this option
        assert len(mine) == 1, (option, name, [e[:MAX_LINE] for e in errors])
        assert f"bar '{option}'" in mine[0] and option in mine[0].split(f"bar '{option}'", 1)[1], mine[0][:MAX_LINE]
        assert len(mine[0]) < MAX_LINE + len(str(path)), mine[0][:MAX_LINE]
    assert len(errors) <= len(OPTIONS)


def test_ten_megabytes_in_front_matter_is_one_line(site, capsys):
    content, argv = site
    text, where = page([("huge", "seq_len", "x" * 10_000_000), ("huge2", "precision", "y" * 10_000_000)])
    errors = build_errors(content, argv, text, capsys)
    path = content / "index.md"
    assert len(errors) == 2, [e[:MAX_LINE] for e in errors]
    for label, option in (("huge", "seq_len"), ("huge2", "precision")):
        (mine,) = [e for e in errors if e.startswith(f"{path}:{where[label]}: ")]
        assert option in mine and len(mine) < MAX_LINE + len(str(path)), mine[:MAX_LINE]


# URL state --------------------------------------------------------------------------------------------------------

def test_every_calculator_url_key_refuses_hostile_values_in_one_sentence():
    """Every setting a calculator link may carry (the option table's URL keys and the calculator's own controls) is
    checked by its key's description (builder.widgets.link_notice; 04-link-notice.js checkLink, mirrored by
    tests/test_link_notice.accepts): each hostile value is refused (0 may be valid, an empty number is the
    default) and the notice names the key in one sentence, the rest of the state kept."""
    from builder.catalog import default_gpus, default_models
    from builder.model.options import OPTIONS
    from builder.widgets import calculator, link_notice
    from tests.test_link_notice import accepts

    gpus = [(key, gpu.display, gpu.usable_bytes) for key, gpu in default_gpus().items()]
    keys = calculator.link_keys(gpus, default_models())
    assert {option.url for option in OPTIONS if option.url} <= set(keys)
    for key, spec in keys.items():
        for value in [*VALUES[:5], "", "x" * 10_000_000, "7 parsecs"]:
            if accepts(spec, value):
                assert value in ("0", "") and (spec[0] in ("whole", "fraction") or value in spec[1:]), (key, value[:12])
                continue
            kind, *allowed = spec
            words = link_notice.WORDS[kind].format(", ".join(allowed) if kind == "choice" else allowed[0],
                                                   *([] if kind == "choice" else allowed[1:]))
            sentence = link_notice.WORDS["line"].format(f"calc.{key}", value[:20], words)
            assert "\n" not in sentence and key in sentence, (key, value[:12])


def test_an_option_a_bar_sets_that_its_mode_does_not_read_is_one_line_at_its_line(site, capsys):
    """The option table's rule (builder.model.options.unread) in front matter: a serving bar that sets micro_batch
    itself is refused at that line, naming the option and the mode; the same option from the chart's shared config
    (which may carry both modes' options, as the calculator page's charts do) is not the bar's to refuse."""
    content, argv = site
    text = "\n".join(["---", "title: Hostile", "slug: index", "order: 1", "summary: s.", "charts:", "  hostile:",
                      "    title: Hostile", "    unit: GiB", "    gpus: [a100-80gb]",
                      "    config: {model: gpt2, seq_len: 1024, micro_batch: 2}", "    bars:",
                      "      - label: shared", "        mode: serve", "        context: 1024",
                      "      - label: own", "        mode: serve", "        context: 1024", "        micro_batch: 4",
                      "---", "{{< chart hostile >}}", ""])
    errors = build_errors(content, argv, text, capsys)
    assert errors == [f"{content / 'index.md'}:19: bar 'own': front matter `micro_batch`: a training option, which "
                      "mode serve does not read; leave it out"]
    (content / "index.md").write_text(text.replace("        micro_batch: 4\n", ""), encoding="utf-8")
    assert cli_site.main(argv) == 0


# A Hugging Face config.json given with --config ----------------------------------------------------------------------

# One small config.json per family the reader follows, between them carrying every field it reads
# (builder.model.architecture.HF_FIELDS, nested ones as rope_scaling.factor, and UNMODELLED_FIELDS' at values it takes).
_LLAMA = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
          "num_hidden_layers": 2, "vocab_size": 128, "intermediate_size": 128, "max_position_embeddings": 1024,
          "attention_dropout": 0.0, "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
          "hidden_act": "silu", "quantization_config": None}
CONFIGS = {
    "gpt2": {"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 64, "n_inner": 256, "vocab_size": 128,
             "n_positions": 1024, "activation_function": "gelu_new", "resid_pdrop": 0.1, "embd_pdrop": 0.1,
             "attn_pdrop": 0.1, "tie_word_embeddings": True, "reorder_and_upcast_attn": False,
             "add_cross_attention": False, "scale_attn_by_inverse_layer_idx": False},
    "llama": {"model_type": "llama", **_LLAMA,
              "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256}},
    "qwen3": {"model_type": "qwen3", **_LLAMA,
              "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256},
              "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "weight_block_size": [16, 16], "ignored_layers": ["lm_head"]}},
    "mistral": {"model_type": "mistral", **_LLAMA, "rope_scaling": {"type": "linear", "factor": 2.0},
                "sliding_window": 512},
    "qwen2": {"model_type": "qwen2", **_LLAMA, "sliding_window": 512, "use_sliding_window": True,
              "max_window_layers": 0},
    "gemma3_text": {"model_type": "gemma3_text", **{k: v for k, v in _LLAMA.items() if k != "hidden_act"},
                    "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 512, "sliding_window_pattern": 2,
                    "layer_types": ["sliding_attention", "full_attention"], "rope_scaling": None,
                    "attn_logit_softcapping": None, "final_logit_softcapping": None,
                    "use_bidirectional_attention": False},
    "mixtral": {"model_type": "mixtral", **_LLAMA, "num_local_experts": 4, "num_experts_per_tok": 2,
                "output_router_logits": False},
    "qwen2_moe": {"model_type": "qwen2_moe", **_LLAMA, "num_experts": 4, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64, "decoder_sparse_step": 1,
                  "mlp_only_layers": [], "norm_topk_prob": False, "qkv_bias": True},
    "gpt_oss": {"model_type": "gpt_oss", **{k: v for k, v in _LLAMA.items() if k != "quantization_config"},
                "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 32,
                "layer_types": ["sliding_attention", "full_attention"], "output_router_logits": False,
                "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256},
                "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
                    "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}},
    "deepseek_v3": {"model_type": "deepseek_v3", **_LLAMA, "kv_lora_rank": 32, "q_lora_rank": 48,
                    "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16, "n_routed_experts": 4,
                    "num_experts_per_tok": 2, "n_shared_experts": 1, "moe_intermediate_size": 32,
                    "first_k_dense_replace": 1, "topk_method": "noaux_tc", "norm_topk_prob": True,
                    "moe_layer_freq": 1, "num_nextn_predict_layers": 0},
    # Phi-3 (Phi3Config): the partial rotary factor at the top and in either rotary object, read to be refused below 1
    # (one place a config, so that each refusal's line is the only line with the key).
    "phi3": {"model_type": "phi3", **_LLAMA, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "sliding_window": 512,
             "partial_rotary_factor": 1.0},
    "phi3 rope_scaling": {"model_type": "phi3", **_LLAMA,
                          "rope_scaling": {"rope_type": "default", "partial_rotary_factor": 1.0}},
    "phi3 rope_parameters": {"model_type": "phi3", **_LLAMA,
                             "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                 "partial_rotary_factor": 1.0}},
}
HOSTILE_JSON = {"0": 0, "-1": -1, "a float": 4096.5, "1e400": "1e400", "a string": "x", "null": None}


def _fields(config: dict, prefix: str = "") -> list[str]:
    """The fields of a config, an object's own as object.field."""
    out = []
    for key, value in config.items():
        out.append(prefix + key)
        if isinstance(value, dict) and not prefix:
            out += _fields(value, key + ".")
    return out


def _with(config: dict, field: str, value) -> str:
    """The config's JSON text with `field` set to `value` (1e400 written as that literal)."""
    config = json.loads(json.dumps(config))
    outer, _, inner = field.partition(".")
    (config[outer] if inner else config)[inner or outer] = "@1e400@" if value == "1e400" else value
    return json.dumps(config, indent=1).replace('"@1e400@"', "1e400")


def _refused_by_table(field: str, value) -> bool:
    """Whether HF_FIELDS refuses the value outright (a value it takes may still be refused by a later check)."""
    from builder.model.architecture import HF_FIELDS

    spec = HF_FIELDS[field]
    if value is None:
        return False
    if spec.kind == "whole":
        return value == "1e400" or isinstance(value, (float, str)) or not spec.low <= value <= spec.high
    if spec.kind == "number":
        return isinstance(value, str) or value < spec.low or value > spec.high or (spec.above and value <= spec.low)
    if spec.kind == "text":
        return not isinstance(value, str) or value == "1e400" or bool(spec.choices)
    return True  # flag, object, names: none of the hostile values is one


def test_the_hostile_configs_carry_every_field_the_reader_checks():
    from builder.model.architecture import HF_FIELDS, UNMODELLED_FIELDS

    carried = {field for config in CONFIGS.values() for field in _fields(config)}
    assert set(HF_FIELDS) <= carried, set(HF_FIELDS) - carried
    assert {key for _, key, _, _ in UNMODELLED_FIELDS} <= carried


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_every_config_json_field_refuses_hostile_values_in_one_line(capsys, tmp_path, family):
    """Issue: num_attention_heads 0 gave a ZeroDivisionError traceback, hidden_size 4096.5 was taken, 1e400 gave
    "Invalid literal for Fraction: 'inf'" and num_hidden_layers 1e8 an error naming --params. Every field read gets
    0, -1, a float, 1e400, a string and null: each value is taken (exit 0) or refused in one line naming the file, its
    line and the field (exit 2); a value the field's row in HF_FIELDS does not accept is always refused."""
    from builder.model.architecture import HF_FIELDS

    base = CONFIGS[family]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(base), encoding="utf-8")
    assert run(capsys, ["estimate", "--config", str(path), "--mode", "serve", "--context", "128"])[0] == 0
    for field in _fields(base):
        if field == "model_type":
            continue
        for name, value in HOSTILE_JSON.items():
            text = _with(base, field, value)
            path.write_text(text, encoding="utf-8")
            code, out, err = run(capsys, ["estimate", "--config", str(path), "--mode", "serve", "--context", "128"])
            assert "Traceback" not in err, (family, field, name, err[-2000:])
            if code == 0:
                assert not (field in HF_FIELDS and _refused_by_table(field, value)), (family, field, name)
                continue
            assert code == 2 and out == "" and err.count("\n") == 1, (family, field, name, err)
            assert "argument --config: " in err and field in err, (family, field, name, err)
            if field in HF_FIELDS and "." not in field and name != "null":  # the file's line (a long path clipped)
                assert re.search(r"config\.json:\d+: ", err), (family, field, name, err)
            if field in HF_FIELDS and _refused_by_table(field, value):  # refused by its own row: at its own line
                key_line = next(i for i, line in enumerate(text.splitlines(), 1)
                                if f'"{field.rpartition(".")[2]}":' in line)
                assert f"config.json:{key_line}: config.json field {field}: " in err, (family, field, name, err)
