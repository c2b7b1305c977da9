"""Front matter `arch: {...}`: a bar changes its catalog model's shape (builder.grids.change_architecture)."""

from builder.catalog import default_models
from builder.content import BarDefinition
from builder.grids import make_config
from builder.model import estimate

MODELS = default_models()


def test_a_bar_may_change_the_models_shape():
    """`arch: {kv_heads: 32}` on a bar: Llama 3 8B with multi-head attention. Its KV cache per token is
    2 x 32 layers x 32 heads x 128 x 2 B = 512 KiB, four times the real model's (serving page, kv-gqa chart)."""
    bar = BarDefinition(label="k = a", preset=None, line=1, lines={},
                        settings={"model": "llama-3-8b", "mode": "serve", "precision": "bf16", "batch": 1,
                                  "context": 1, "arch": {"kv_heads": 32}})
    config, errors = make_config(bar, {}, MODELS, "page.md")
    assert errors == [] and config.model.kv_heads == 32 and config.model.published_params is None
    assert estimate(config).get("kv_cache") == 2 * 32 * 32 * 128 * 2 == 4 * estimate(
        config.with_changes(model=MODELS["llama-3-8b"])).get("kv_cache")
    no_model = BarDefinition(label="x", preset=None, line=3, lines={"arch": 4},
                             settings={"params": 7_000_000_000, "arch": {"kv_heads": 8}})
    _, errors = make_config(no_model, {}, MODELS, "page.md")
    assert [(e.line, e.message) for e in errors] == [(4, "bar 'x': arch: needs a catalog model to change (set model: ...)")]
