"""The weight copies torch.autocast saves for backward, as a rule.

Under torch.autocast a linear layer casts its fp32 weight to the autocast dtype, and autograd saves that
copy for backward: one copy of every weight matrix of the stage's layers (biases are cast but not saved)
and of the output layer, per micro-batch in flight. Under full recomputation a layer saves nothing; its
copies are made again in its backward.
"""

from __future__ import annotations

from builder.model.cite import Cite
from builder.model.expr import both, eq, fmt, per_unit, sym, when
from builder.model.partrules import PartRule, RuleSet, bytes_of

AUTOCAST = (Cite("pytorch-2-13", "aten/src/ATen/autocast_mode.cpp cached_cast") + " (autocast): a linear layer "
            "under torch.autocast casts its fp32 weight to the autocast dtype and autograd saves that copy for backward")
NOT_MODELLED = ("simplification: the op lists follow autocast's device-independent effects (fp32 residual "
                "stream, norms and rotary tables; one input copy per projection); CUDA autocast also runs pow, "
                "exp and softmax in fp32, which changes GPT-2's Python GeLU (not modelled)")
copy_bytes = bytes_of(sym("activation_dtype"))

AUTOCAST_COPIES = RuleSet(symbols={}, parts=(
    PartRule("activations/autocast_weight_copies",
             (when(eq(sym("recompute"), "full"), 0, sym("linear_matrices"))
              + when(sym("stage_has_head"), sym("vocab_rows"), 0)) * copy_bytes * sym("stage_in_flight"),
             "in_flight x (linear weights of the stage's layers + head) x bytes(autocast dtype)", AUTOCAST,
             fmt("{0} B/linear param ({1})", per_unit(copy_bytes), sym("activation_dtype")), NOT_MODELLED,
             when=both(sym("has_architecture"), sym("autocast"), eq(sym("mode"), "train"))),
))
