"""How an optimizer's step runs, and the temporaries it allocates beyond its persistent states, as rules.

torch.optim offers three implementations of a step (its documentation's words), and a fourth way to run it:
- 'for-loop' (foreach=False): one parameter at a time, so a temporary lives for one tensor only;
- 'foreach' (the default on CUDA for Adam, AdamW and SGD: torch/optim/optimizer.py
  _default_to_fused_or_foreach, torch 2.13): each out-of-place _foreach op allocates its result for every
  tensor of a (device, dtype) group at once;
- 'fused' (fused=True): one kernel updates parameters and states in place, no temporaries;
- 'in-backward': a per-parameter optimizer stepped from register_post_accumulate_grad_hook, each gradient
  freed as soon as its parameter is updated (PyTorch tutorial "How to save memory by fusing the optimizer
  step into the backward pass"; torchtitan's --optimizer.early_step_in_backward). The tutorial's optimizers
  are for-loop ones, so its temporaries are the for-loop's, for one tensor, and no step phase follows.

The temporaries per optimizer (L: the largest parameter tensor on the GPU, in the state dtype):
- Adam/AdamW: foreach, torch._foreach_sqrt(exp_avg_sqs), one second-moment-sized tensor list; for-loop,
  denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps), 2 x L for a moment (torch/optim/adam.py 2.13);
- SGD (with or without momentum, no weight decay): none in any implementation (torch/optim/sgd.py 2.13);
- Adafactor: for-loop (its default: torch/optim/_adafactor.py 2.13 defaults to it 'as Adafactor is commonly used
  when memory is prohibitive'), var_estimate = row_var @ col_var, 1 x L; foreach, one per matrix, as large as
  the gradients; no fused implementation;
- Lion: the reference implementation lion-pytorch 0.2 (lion_pytorch.py update_fn,
  exp_avg.clone().mul_(beta1).add(grad, alpha=1 - beta1)), for-loop, 2 x L; timm 1.0 optim/lion.py foreach,
  one momentum-sized list; bitsandbytes' Lion and lion-pytorch's Triton kernel are fused, none;
- bitsandbytes 8-bit AdamW: one fused CUDA kernel per parameter (bitsandbytes functional.py
  optimizer_update_8bit_blockwise, in place): none; it has no for-loop or foreach implementation;
- torchao's AdamW8bit, AdamW4bit and AdamWFp8 (torchao 0.19 torchao/optim/adam.py): one torch.compile'd step per
  parameter, so a for-loop; it dequantises both moments to fp32 and requantises them. Inductor's generated code
  (checked on CPU with torch 2.13, not on CUDA: derived, not measured) keeps two fp32 parameter-sized buffers for
  AdamW8bit (8 B x L), about 25 B x L for AdamW4bit (two fp32, two int64 and two packed 4-bit buffers), and none of
  a parameter's size for AdamWFp8.
Which implementation a run gets with optimizer_impl unset (DEFAULT_IMPL): the optimizer its framework builds, where
the model can tell the framework.
- Megatron-LM (a Megatron precision or implementation megatron: builder.model.gradbuffers' MEGATRON): Transformer
  Engine's FusedAdam and FusedSGD, else Apex's; torch.optim only
  when neither is installed (megatron/core/optimizer/__init__.py's imports, Megatron-LM d98e8a6): fused.
- DeepSpeed's ZeRO (a ZeRO stage, not FSDP, not Megatron-LM: builder.model.buckets' DEEPSPEED_ENGINE): the config's
  "optimizer" section, type Adam or AdamW, builds DeepSpeed's FusedAdam (one multi_tensor_adam kernel, in place),
  DeepSpeedCPUAdam when the optimizer is offloaded, torch.optim only with torch_adam; type Lion builds FusedLion
  (deepspeed/runtime/engine.py _configure_basic_optimizer, DeepSpeed edaa722): fused. DeepSpeed has no SGD,
  Adafactor or low-bit type, so those are the client's torch.optim (or other) optimizers, with their own defaults.
- Anything else: torch.optim's own choice, foreach for Adam, AdamW and SGD on CUDA (torch/optim/optimizer.py
  _default_to_fused_or_foreach), the optimizers' own above for the others. The model cannot tell a Hugging Face
  Trainer run (whose default optim is adamw_torch_fused with torch >= 2.8: transformers 5.23 training_args.py
  default_optim) from a plain loop, nor torchtitan (optimizer.implementation "fused" by default:
  torchtitan/components/optimizer/optimizer.py at b5bcd76) or a torchtune config (fused: True in most recipes,
  False in others): those choose optimizer_impl themselves.
DeepSpeed's ZeRO hands the optimizer one flat fp32 partition per parameter group (stages 1 and 2: stage_1_and_2.py
_optimizer_step, one group at a time) or per sub-group (stage 3: stage3.py _optimizer_step, param_groups[...]['params']
= [fp32_param], one sub-group of at most sub_group_size elements plus one parameter's partition at a time), so a
foreach step's list holds one (sub-)group: builder.model.step bounds its temporaries by that.
Simplification, named: 'L' is one tensor as the model holds it (an FSDP2 shard of it under FSDP); under DeepSpeed's
ZeRO a for-loop step's one tensor is the flat (sub-)group, not a parameter (not modelled); with the step inside
backward, the largest tensor's step temporaries are counted at every moment of backward, not only at the instant that
tensor steps.
"""

from __future__ import annotations

from builder.model.adapters import ADAPTER_DTYPE, HEAD as HEAD_TARGET
from builder.model.buckets import DEEPSPEED_ENGINE
from builder.model.cite import Cite
from builder.model.expr import best, both, either, eq, has, isin, maximum, negate, sym, when, within
from builder.model.gradbuffers import MEGATRON
from builder.model.paging import PAGED_OPTIMIZERS, PAGING
from builder.model.partrules import bytes_of
from builder.model.placement import TP_SHARE

FOREACH_ADAM = (Cite("pytorch-adam", "torch/optim/adam.py _multi_tensor_adam") + ": exp_avg_sq_sqrt = "
                "torch._foreach_sqrt(exp_avg_sqs), one state-sized temporary; measured: see the Validation page")
LOOP_ADAM = (Cite("pytorch-adam", "torch/optim/adam.py _single_tensor_adam") + ": denom = (exp_avg_sq.sqrt() / "
             "bias_correction2_sqrt).add_(eps), two tensors of one parameter's size at once")
FOREACH_ADAFACTOR = (Cite("pytorch-adafactor", "torch/optim/_adafactor.py _multi_tensor_adafactor") + ": var_estimates "
                     "= row_var @ col_var, one gradient-sized tensor per matrix (its docstring: foreach uses ~ "
                     "sizeof(params) more peak memory); measured: see the Validation page")
LOOP_ADAFACTOR = (Cite("pytorch-adafactor", "torch/optim/_adafactor.py _single_tensor_adafactor") + " (the default): "
                  "var_estimate = row_var @ col_var, one tensor of one parameter's size")
LOOP_LION = (Cite("lion-pytorch", "lion_pytorch/lion_pytorch.py update_fn") + ": exp_avg.clone().mul_(beta1).add(grad, "
             "alpha=1 - beta1), the clone and the sum of one parameter's size at once")
FOREACH_LION = (Cite("timm-1-0", "timm/optim/lion.py _multi_tensor_lion")
                + ": torch._foreach_mul(exp_avgs, beta1), one momentum-sized list")
IN_BACKWARD = (Cite("pytorch-optimizer-in-backward") + " (register_post_accumulate_grad_hook, one foreach=False "
               "optimizer per parameter); " + Cite("torchtitan", "--optimizer.early_step_in_backward"))

LOOP_TORCHAO = (Cite("torchao-low-bit-optim", "torchao/optim/adam.py single_param_adam") + " under torch.compile (one "
                "parameter at a time); the buffers inductor keeps, read from its generated code on CPU with torch 2.13 "
                "(not verified on CUDA)")
TORCHAO_OPTIMIZERS = ("adamw8bit-torchao", "adamw4bit", "adamwfp8")
# The optimizers a framework builds itself (the docstring's list; Megatron-LM d98e8a6 megatron/core/optimizer/
# __init__.py, DeepSpeed edaa722 deepspeed/runtime/engine.py _configure_basic_optimizer): both fused.
MEGATRON_BUILDS = both(MEGATRON,
                       isin(sym("optimizer"), "adam", "adamw", "sgd", "sgd-momentum"))
DEEPSPEED_BUILDS = both(DEEPSPEED_ENGINE, isin(sym("optimizer"), "adam", "adamw", "lion"))
# The optimizer's own default implementation: the framework's fused optimizer where it builds one (above), else
# torch.optim's foreach on CUDA, Adafactor's for-loop, lion-pytorch's for-loop, torchao's per-parameter compiled step,
# bitsandbytes' fused kernel.
# MS-AMP's LBAdam/LBAdamW (precision msamp-o2) steps one parameter at a time (msamp/optim/adamw.py adamw_fn: a
# Python loop over the parameters, param.float() and grads[i].float() each, then two CUDA kernels): a for-loop whose
# two fp32 copies of one tensor are the for-loop's 2 x L in fp32.
DEFAULT_IMPL = when(sym("msamp"), "for-loop", when(isin(sym("optimizer"), "adam8bit", *PAGED_OPTIMIZERS), "fused",
                    when(either(MEGATRON_BUILDS, DEEPSPEED_BUILDS), "fused",
                         when(isin(sym("optimizer"), "adafactor", "lion", *TORCHAO_OPTIMIZERS), "for-loop",
                              "foreach"))))
# How many tensors of one parameter's size a for-loop step holds at once (in the state dtype).
LOOP_TENSORS = when(isin(sym("optimizer"), "adam", "adamw", "lion"), 2,
                    when(eq(sym("optimizer"), "adafactor"), 1, 0))
LOOP_MSAMP = (Cite("msamp", "msamp/optim/adamw.py LBAdamW.adamw_fn") + ": for each parameter, param.float() and "
              "grads[i].float(), two fp32 tensors of one parameter's size")
LOOP_SOURCE = when(sym("msamp"), LOOP_MSAMP, when(eq(sym("optimizer"), "adafactor"), LOOP_ADAFACTOR,
                   when(eq(sym("optimizer"), "lion"), LOOP_LION,
                        when(isin(sym("optimizer"), *TORCHAO_OPTIMIZERS), LOOP_TORCHAO, LOOP_ADAM))))
# The state dtype the step computes in: torch keeps states in the parameter's dtype (torch/optim/adamw.py
# _init_group: exp_avg = torch.zeros_like(p)), so LoRA adapters' are the adapters' dtype: fp32 under PEFT, the model's
# own under torchtune (builder.model.adapters.ADAPTER_DTYPE; builder.model.states reads the same expression).
# bitsandbytes' PagedAdamW keeps fp32 states whatever the parameter's dtype (optim_bits=32: get_state_buffer(p,
# dtype=torch.float32), bitsandbytes/optim/optimizer.py Optimizer2State.init_state).
STATE_DTYPE = when(eq(sym("optimizer"), "paged-adamw"), "fp32",
                   when(both(sym("lora_rank"), sym("has_architecture"), negate(sym("chosen_state_dtype"))),
                        ADAPTER_DTYPE, sym("optimizer_state_dtype")))
# MS-AMP's step computes in fp32 whatever its states' dtypes (msamp/optim/adamw.py: param.float(), grad.float()).
STEP_DTYPE = when(sym("msamp"), "fp32", STATE_DTYPE)
# One parameter tensor of a row (builder.model.tensors) on a GPU: split over the tensor-parallel ranks that share
# it (builder.model.placement; an expert's matrices over tp, as expert parallelism places whole experts).
_TENSOR = sym("dim0") * sym("rest") / when(eq(sym("group"), "mlp/experts"), sym("tp"), TP_SHARE)
# The largest parameter tensor on a GPU, in elements (0 without an architecture). Simplification, named: taken
# over the whole model, not one pipeline stage; the stages evaluated (the first with the embedding, the last with
# the head or its tied copy) both hold a vocabulary-sized matrix, the largest of a decoder.
LARGEST_TENSOR = when(sym("has_architecture"), within(best(sym("parameter_tensors"), _TENSOR), _TENSOR), 0)
# The largest trainable tensor on this GPU: that one, or under LoRA an adapter matrix, r x the wider side of the
# projections it adapts (hidden or the MLP's width; the vocabulary with an adapter on the output layer, lm_head).
_WIDEST = (sym("hidden"), sym("heads") * sym("head_dim"), sym("ffn"), sym("expert_ffn"))
_ADAPTER = sym("lora_rank") * when(has(sym("lora_targets"), HEAD_TARGET), maximum(*_WIDEST, sym("vocab")),
                                   maximum(*_WIDEST))
LARGEST_TRAINABLE = when(both(sym("lora_rank"), sym("has_architecture")), _ADAPTER / sym("tp"), sym("largest_tensor"))


# The symbols the model states and the step's rules both read (optimizer_ranks: builder.model.states' sharding).
OPTIMIZER_STEP = {
    "largest_tensor": LARGEST_TENSOR,
    "largest_trainable": LARGEST_TRAINABLE,
    "step_impl": when(sym("optimizer_impl"), sym("optimizer_impl"), DEFAULT_IMPL),
    "in_backward": eq(sym("step_impl"), "in-backward"),
    # A for-loop step's (and the step inside backward's) temporaries: k tensors of the largest trainable tensor,
    # split as the optimizer states are.
    "loop_temporaries": sym("largest_trainable") / sym("optimizer_ranks") * when(
        eq(sym("optimizer"), "adamw8bit-torchao"), 8, when(eq(sym("optimizer"), "adamw4bit"), 25,
                                                           LOOP_TENSORS * bytes_of(STEP_DTYPE))),
    # Paged optimizers (builder.model.paging): which share of the states can leave the GPU, and what the step pages in.
    **PAGING,
}
