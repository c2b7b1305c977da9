"""The weight copies torch.autocast saves for backward, as a rule.

Under torch.autocast a linear layer casts its fp32 weight to the autocast dtype, and autograd saves that
copy for backward: one copy of every weight matrix of the stage's layers (biases are cast but not saved)
and of the output layer, per micro-batch in flight. Under full recomputation a layer saves nothing; its
copies are made again in its backward.
"""

from __future__ import annotations

from builder.model.cite import Cite
from builder.model.config import CHECKPOINTING
from builder.model.expr import both, eq, fmt, isin, negate, per_unit, sym, when
from builder.model.partrules import PartRule, RuleSet, bytes_of
from builder.model.states import HEAD_ADAPTERS, LAYER_ADAPTERS

AUTOCAST = (Cite("pytorch-2-13", "aten/src/ATen/autocast_mode.cpp cached_cast") + " (autocast): a linear layer "
            "under torch.autocast casts its fp32 weight to the autocast dtype and autograd saves that copy for backward")
NOT_MODELLED = ("simplification: the op lists follow autocast's device-independent effects (fp32 residual "
                "stream, norms and rotary tables; one input copy per projection); CUDA autocast also runs pow, "
                "exp and softmax in fp32, which changes GPT-2's Python GeLU (not modelled)")
copy_bytes = bytes_of(sym("activation_dtype"))
# QLoRA: bitsandbytes' MatMul4Bit keeps the packed 4-bit weight for backward and dequantises it there, so the 4-bit
# linear layers leave no autocast copy; the output layer is 16-bit unless PEFT's prepare_model_for_kbit_training cast
# it to fp32 (kbit_prepare "prepare"; a 16-bit weight is not copied). The LoRA adapters are fp32 and train: each is
# cast and its copy saved. Measured with bitsandbytes 0.50.2 and PEFT 0.21.2 on CPU (tests/test_qlora_peft.py).
QLORA = (Cite("bitsandbytes-95f9af3", "bitsandbytes/autograd/_functions.py MatMul4Bit.forward: ctx.tensors = (None, B)")
         + "; " + Cite("peft-kbit", "peft/utils/other.py prepare_model_for_kbit_training"))
# Which weights are fp32, so that autocast copies them: the policy's weights (16-bit weights under autocast are not
# copied: the cast of a bf16 tensor to bf16 is the tensor), or for QLoRA only the output layer after prepare.
FP32_LINEARS = both(negate(sym("qlora")), eq(sym("param_dtype"), "fp32"))
FP32_HEAD = when(sym("qlora"), eq(sym("kbit_prepare"), "prepare"), eq(sym("param_dtype"), "fp32"))

AUTOCAST_COPIES = RuleSet(symbols={}, parts=(
    PartRule("activations/autocast_weight_copies",
             # The output layer's adapter (lora_targets lm_head) is outside the checkpointed layers: its copies stay.
             (when(isin(sym("recompute"), *CHECKPOINTING), 0, when(FP32_LINEARS, sym("linear_matrices"), 0)
                   + when(sym("lora_rank") > 0, LAYER_ADAPTERS * sym("stage_layers"), 0))
              + when(sym("lora_rank") > 0, HEAD_ADAPTERS, 0)
              + when(both(sym("stage_has_head"), FP32_HEAD), sym("vocab_rows"), 0))
             * copy_bytes * sym("stage_in_flight"),
             "in_flight x (linear weights of the stage's layers + LoRA adapters + head) x bytes(autocast dtype)",
             AUTOCAST + "; " + QLORA,
             fmt("{0} B/linear param ({1})", per_unit(copy_bytes), sym("activation_dtype")), NOT_MODELLED,
             when=both(sym("has_architecture"), sym("autocast"), eq(sym("mode"), "train"))),
))
