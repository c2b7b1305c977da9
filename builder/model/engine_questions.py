"""The reverse questions of serving, answered under an engine's own accounting (builder.model.engines).

Three questions for vLLM and SGLang, each under the engine's own flag names (`--max QUESTION` on the command line):

- the largest length: vLLM's `max-model-len`, SGLang's `context-length`, at which the engine starts (its KV cache
  holds one request of that many tokens, the check both engines make at start-up), or, where the concurrency target
  is given (`--max-num-seqs`, `--max-running-requests`), that many requests at once;
- the largest concurrency for a length: vLLM's `max-num-seqs`, SGLang's `max-running-requests` (that many
  requests of `--max-model-len` / `--context-length` tokens fit at once);
- the fewest GPUs for a length: vLLM's `tensor-parallel-size`, SGLang's `tp-size` (the smallest tensor-parallel
  degree at which the engine starts, one request of the length fitting).

Hugging Face generate has no budget of its own, so its two questions are against the GPU as a CUDA process sees it
(cudaMemGetInfo's total), the rules' peak of generate (builder.model.engine_hf: weights, cache, the larger of the
prefill's and the last decode step's working sets, and --cuda-context) at or under it:

- the largest batch_size (input_ids rows, `--batch`) of prompts of `--context` tokens for `--max-new-tokens`;
- the largest max_new_tokens (GenerationConfig's) for `--batch` prompts of `--context` tokens.

Both search a peak that never falls as the batch or max_new_tokens grows (every term is linear in the batch; the
cache, the static cache's length and the keys the prefill attends to never shrink with more new tokens), which the
tests check with random catalog configurations. One exception is real in transformers: a sliding layer's last-step
copy shrinks from the prompt to the window at the second decode step (DynamicSlidingWindowLayer keeps the prompt
until the first), which the prefill's larger cache covers whenever two or more layers slide. The bisection's answer
fits and one past it does not in every case; only "largest" rests on monotonicity.

"Fit" is the engine's own number: vLLM's block count over the blocks one request takes (the whole part of its
"Maximum concurrency" line, kv_cache_utils.py get_max_concurrency_for_kv_cache_config), SGLang's token pool over a
request's whole pages. Each answer is exact under those rules: at the answer it holds, one past it (one token, one
request, or the next tensor-parallel degree down) it does not. The searches evaluate the engine's rules at every
trial; they rely on monotonicity the tests check with random configurations: a longer request never raises the
concurrency, and more requests never enlarge the KV cache (vLLM's profile run samples one logits row per request).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from builder.model.engines import EngineReport, EngineSettings, engine_report
from builder.model.questions import tensor_degrees
from builder.model.ranges import RANGE_OF

LENGTH_LIMIT = int(RANGE_OF["context"].high)  # tokens: the range of a served context (builder.model.ranges)
REQUEST_LIMIT = int(RANGE_OF["batch"].high)  # requests at once: the range of concurrent sequences


def holds_target(values: dict[str, Any], target: int) -> bool:
    """The engine starts and its KV cache holds `target` requests of the length at once."""
    return bool(values["fits"]) and values["concurrent_requests"] >= target


def holds_requests(values: dict[str, Any], target: int) -> bool:
    """The engine starts, holds `target` requests at once, and runs that many (SGLang caps max_running_requests
    at half its tokens: mem_cache/kv_cache_configurator.py resolve_max_num_reqs)."""
    runs = values.get("max_running_requests", target)
    return holds_target(values, target) and runs >= target


def starts(values: dict[str, Any], target: int) -> bool:
    """The engine starts: one request of the length fits."""
    return bool(values["fits"])


@dataclass(frozen=True)
class Question:
    """One reverse question: the --max choice, its engine, the setting it answers (an EngineSettings field, or
    the run's 'tp' or 'batch'), what holds at the answer, and its words."""

    name: str
    engine: str
    setting: str
    kind: str  # 'length' or 'requests' (the largest value that holds), 'tp' (the smallest degree that holds)
    holds: Callable[[dict[str, Any], int], bool]  # (the engine's values, the concurrency target) -> it holds
    words: str  # the question in words, with {target} (the concurrency target) and {length} (tokens per request)
    # A length question asked without its concurrency target: the target is one request (the engine starts), in
    # these words. The engine's own default target (vLLM's 256 or 1,024 sequences a step) is a batch size for its
    # scheduler, not a promise that so many full-length requests fit: it would answer 128 tokens for Llama 3.1 8B on
    # an L4, which starts vLLM with 35,424 tokens of KV cache.
    alone: str = ""

    @property
    def target(self) -> str:
        """The input that holds the concurrency target: vLLM's max_num_seqs, SGLang's max_running_requests,
        generate's batch (input_ids rows)."""
        return {"vllm": "max_num_seqs", "sglang": "running_requests", "hf": "batch"}[self.engine]

    @property
    def length(self) -> str:
        """The input that holds the tokens of one request (generate's: the prompt)."""
        return {"vllm": "max_model_len", "sglang": "context_len", "hf": "context"}[self.engine]

    @property
    def flag(self) -> str:
        return "--" + self.setting.replace("_", "-") if self.setting != "tp" else "--" + self.name


QUESTIONS: dict[str, Question] = {q.name: q for q in (
    Question("max-model-len", "vllm", "max_model_len", "length", holds_target,
             "the largest --max-model-len whose KV cache holds --max-num-seqs {target} requests of that length at once",
             alone="the largest --max-model-len at which vLLM starts (its KV cache holds one request of that length; "
                   "give --max-num-seqs to hold that many at once)"),
    Question("max-num-seqs", "vllm", "max_num_seqs", "requests", holds_requests,
             "the largest --max-num-seqs whose requests of --max-model-len {length} tokens all fit in the KV cache at "
             "once"),
    Question("tensor-parallel-size", "vllm", "tp", "tp", starts,
             "the fewest tensor-parallel GPUs (--tensor-parallel-size) at which vLLM starts with --max-model-len "
             "{length}"),
    Question("context-length", "sglang", "context_length", "length", holds_target,
             "the largest --context-length whose KV pool holds --max-running-requests {target} requests of that "
             "length at once",
             alone="the largest --context-length at which SGLang starts (its KV pool holds one request of that "
                   "length; give --max-running-requests to hold that many at once)"),
    Question("max-running-requests", "sglang", "max_running_requests", "requests", holds_requests,
             "the largest --max-running-requests whose requests of --context-length {length} tokens all fit in the "
             "KV pool at once"),
    Question("tp-size", "sglang", "tp", "tp", starts,
             "the fewest tensor-parallel GPUs (--tp-size) at which SGLang starts with --context-length {length}"),
    Question("batch-size", "hf", "batch", "requests", starts,
             "the largest batch_size (input_ids rows, --batch) of {length}-token prompts whose generate("
             "max_new_tokens={new}) peaks within the GPU"),
    Question("max-new-tokens", "hf", "max_new_tokens", "length", starts,
             "the largest max_new_tokens for which generate on {target} prompts of {length} tokens peaks within the "
             "GPU"),
)}


@dataclass(frozen=True)
class EngineAnswer:
    """A question's answer (None: no value holds) and the engine's report at it (at the asked settings if none)."""

    question: Question
    value: int | None
    report: EngineReport
    alone: bool = False  # a length question asked without its concurrency target (Question.alone)
    # A length answer at the model's own limit, not the memory's: one more is refused as too long (the engine's
    # too_long rule: vLLM's and SGLang's max positions, generate's learned positions).
    capped: bool = False

    @property
    def text(self) -> str:
        """The question in words, with the target or length it was asked for."""
        v, q = self.report.values, self.question
        return (q.alone if self.alone else q.words).format(target=f"{v[q.target]:,}", length=f"{v[q.length]:,}",
                              new=f"{v.get('max_new_tokens', 0):,}")


def _last(holds: Callable[[int], bool], low: int, high: int) -> int | None:
    """The largest n in [low, high] with holds(n), for a predicate that holds up to some n and not after; None if
    it does not hold at `low`. Bisection: the bracket's low end always holds, its high end never (or is `high`)."""
    if not holds(low):
        return None
    if holds(high):
        return high
    good, bad = low, high
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if holds(middle) else (good, middle)
    return good


def answer(name: str, config: Any, settings: EngineSettings, gpu_total: int, gpu_id: str,
           gpu: Any = None) -> EngineAnswer:
    """Answer question `name` for `config` served with `settings` on a GPU of `gpu_total` bytes (ValueError naming
    the option when the question does not belong to the engine or lacks its target)."""
    question = QUESTIONS[name]
    if settings.engine != question.engine:
        own = ", ".join(q.name for q in QUESTIONS.values() if q.engine == settings.engine)
        raise ValueError(f"max: {name} is a question of --engine {question.engine}; under --engine {settings.engine} "
                         f"ask {own}")
    target_setting = {"vllm": "max_num_seqs", "sglang": "max_running_requests"}.get(question.engine)
    alone = bool(question.alone) and getattr(settings, target_setting) is None

    def report_at(value: int) -> EngineReport:
        if question.setting in ("tp", "batch"):  # the run's own, not an engine option
            return engine_report(config.with_changes(**{question.setting: value}), settings, gpu_total, gpu_id, gpu)
        return engine_report(config, dataclasses.replace(settings, **{question.setting: value}), gpu_total, gpu_id,
                             gpu)

    try:
        asked = engine_report(config, settings, gpu_total, gpu_id, gpu)
    except ValueError:
        if question.kind != "length" or getattr(settings, question.setting, None) is not None:
            raise
        # The length asked about was left out and its default is refused (generate's default 20 new tokens after a
        # prompt that fills GPT-2's learned positions) where a shorter one is not: the search starts from 1.
        asked = report_at(1)

    def holds(value: int) -> bool:
        # A length question keeps the asked target; a concurrency question's target is the value itself.
        target = value if question.kind == "requests" else 1 if alone else asked.values[question.target]
        return question.holds(report_at(value).values, target)

    if question.kind == "length":
        value = _last(holds, 1, LENGTH_LIMIT)
    elif question.kind == "requests":
        # vLLM refuses more sequences than tokens per step (vllm/config/scheduler.py SchedulerConfig._verify_args).
        limit = asked.values["max_num_batched_tokens"] if question.engine == "vllm" else REQUEST_LIMIT
        value = _last(holds, 1, limit)
    else:
        value = next((tp for tp in tensor_degrees(config.model) if holds(tp)), None)
    capped = question.kind == "length" and value is not None and bool(report_at(value + 1).values["too_long"])
    return EngineAnswer(question, value, report_at(value) if value is not None else asked, alone, capped)
