"""Decode steps of the Ascend MRV2 runner on the counting stand-in for the NPU
(`device_counts`), through core's own call path (runs in the composed environment).

One step is what the engine asks of the worker, in core's order:

1. `update_requests(scheduler_output)`: core's call in `GPUModelRunner.execute_model`
   (core's method: the scheduler's num_computed_tokens into the CPU mirror);
2. `prepare_inputs(scheduler_output, batch_desc)`: core's call in `execute_model`,
   reaching the plugin's whole `NPUModelRunner.prepare_inputs`;
3. `sample_tokens(None)`: core's method as the worker calls it: the `AsyncOutput`
   copy, core's `postprocess_sampled` call reaching the plugin's override;
4. `get_output()` on what it returned, as the engine does for each step's output.

Replaced, because a CPU cannot run them, each by the same arithmetic on the
stubbed device's tensors: core's Triton kernels `prepare_pos_seq_lens`,
`combine_sampled_and_draft_tokens`, `expand_idx_mapping` and `post_update`. Not
run: the model forward, attention-metadata building (`prepare_attn`) and the
sampler's kernels (`sample` returns fixed tokens; rejections are scripted).
Every device-to-host copy and event wait anywhere in steps 1-4 is counted, not
only the ones the metadata patch touches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import types
from typing import Any, Callable, Iterator

SWITCH = "VLLM_ASCEND_MRV2_HOST_SEQ_LENS"
STEPS = 8
BATCH = 8  # requests per step, as the source's eight-step profile (batch 8)
MAX_REQS = 16
MAX_TOKENS = 64
KERNELS = ("prepare_pos_seq_lens", "combine_sampled_and_draft_tokens", "expand_idx_mapping", "post_update")


@dataclasses.dataclass
class DecodeRun:
    """What `STEPS` decode steps did: counts by name, call sites, seq_lens seen."""

    counts: dict[str, int]
    sites: list[dict[str, Any]]
    seq_lens: list[list[int]]
    expected: list[list[int]]


def _bound(real: Callable, args: tuple, kwargs: dict) -> dict[str, Any]:
    """A replaced kernel's arguments by the real kernel's parameter names."""
    bound = inspect.signature(real).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def cpu_kernels(counts: Any, core_input_batch: Any) -> dict[str, Callable]:
    """CPU versions of core's Triton kernels the decode path launches (names and
    parameters as core's `input_batch` module defines them)."""
    import torch

    real = {name: getattr(core_input_batch, name) for name in KERNELS}

    def prepare_pos_seq_lens(*args, **kwargs):
        a = _bound(real["prepare_pos_seq_lens"], args, kwargs)
        with counts.device_kernel():
            qsl, idx = a["query_start_loc"], a["idx_mapping"]
            for i in range(idx.shape[0]):
                start, end = int(qsl[i]), int(qsl[i + 1])
                computed = int(a["num_computed_tokens"][int(idx[i])])
                a["pos"][start:end] = torch.arange(computed, computed + end - start)
                a["seq_lens"][i] = computed + end - start

    def combine_sampled_and_draft_tokens(*args, **kwargs):
        a = _bound(real["combine_sampled_and_draft_tokens"], args, kwargs)
        with counts.device_kernel():
            qsl, cu = a["query_start_loc"], a["cu_num_logits"]
            indices = []
            for i in range(a["idx_mapping"].shape[0]):
                n = int(cu[i + 1]) - int(cu[i])
                indices.extend(range(int(qsl[i + 1]) - n, int(qsl[i + 1])))
            return torch.tensor(indices, dtype=torch.int64, device=a["input_ids"].device
                                ).as_subclass(type(a["input_ids"]))

    def expand_idx_mapping(*args, **kwargs):
        a = _bound(real["expand_idx_mapping"], args, kwargs)
        with counts.device_kernel():
            cu, idx = a["cu_num_logits"], a["idx_mapping"]
            expanded, local = [], []
            for i in range(idx.shape[0]):
                n = int(cu[i + 1]) - int(cu[i])
                expanded += [int(idx[i])] * n
                local += list(range(n))
            kind = type(idx)
            return (torch.tensor(expanded, dtype=torch.int32).as_subclass(kind),
                    torch.tensor(local, dtype=torch.int32).as_subclass(kind))

    def post_update(*args, **kwargs):
        a = _bound(real["post_update"], args, kwargs)
        with counts.device_kernel():
            qsl, idx = a["query_start_loc"], a["idx_mapping"]
            query_lens = qsl[1:idx.shape[0] + 1] - qsl[:idx.shape[0]]
            a["num_computed_tokens"][idx] += (query_lens - a["num_rejected"]).to(a["num_computed_tokens"].dtype)

    return {"prepare_pos_seq_lens": prepare_pos_seq_lens,
            "combine_sampled_and_draft_tokens": combine_sampled_and_draft_tokens,
            "expand_idx_mapping": expand_idx_mapping, "post_update": post_update}


@contextlib.contextmanager
def _replaced(modules: list[Any], kernels: dict[str, Callable]) -> Iterator[None]:
    saved = []
    for module in modules:
        for name, fn in kernels.items():
            if name in vars(module):
                saved.append((module, name, vars(module)[name]))
                setattr(module, name, fn)
    try:
        yield
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


@contextlib.contextmanager
def _switch(on: bool) -> Iterator[None]:
    old = os.environ.get(SWITCH)
    os.environ[SWITCH] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(SWITCH, None)
        else:
            os.environ[SWITCH] = old


def _make(cls: Any, values: dict[str, Any]) -> Any:
    """A core dataclass or NamedTuple from the fields this core declares (others None)."""
    names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else list(cls._fields)
    return cls(**{n: values.get(n) for n in names})


def new_runner(cls: Any, vllm_config: Any, device: Any) -> tuple[Any, list]:
    """A `cls` runner made by its real `__init__` chain (the plugin's, core's through
    its super() call), statement by statement: every attribute they set at this
    release, each statement the CPU cannot run named (runner_init.py). The caller
    then replaces what a decode step on the counting device needs."""
    import runner_init

    runner, skipped = runner_init.build(cls, vllm_config, device)
    setattr(runner, "_overlay_smoke_built", True)  # walker.SMOKE_BUILT: its missing attributes are the smoke's
    return runner, skipped


def seed(obj: Any, values: dict[str, Any]) -> Any:
    """Give `obj` (made by its real `__init__` chain, `runner_init.build`) the smoke's
    `values`: an attribute its `__init__`s built is written in place, so views of it
    that the class itself made (the plugin's `num_computed_tokens_cpu` over core's
    `num_computed_tokens_np`, 0.28.0 on) see the values too; a namespace value seeds
    the built object's own attributes; one its `__init__`s could not build on the
    CPU (`NotBuilt`) or do not set gets the value itself."""
    from runner_init import NotBuilt

    for name, value in values.items():
        current = vars(obj).get(name)
        if current is None or isinstance(current, NotBuilt):
            setattr(obj, name, value)
        elif isinstance(value, types.SimpleNamespace):
            seed(current, vars(value))
        elif isinstance(value, (dict, int, float, str)):
            setattr(obj, name, value)
        else:
            current[:] = value
    return obj


def request_state(cls: Any, device: Any, *, draft_tokens: int, prompt: Any) -> Any:
    """The runner's request state, made by its class's real `__init__` chain
    (`runner_init.build`: the plugin's, core's through super()), holding MAX_REQS
    requests whose prefill of `prompt[i]` tokens is done, as core's `add_request`
    leaves them once its staged writes are applied. Device tensors a statement could
    not build on the CPU are made on the counting device."""
    import numpy as np
    import runner_init
    import torch

    state, _ = runner_init.build(cls, MAX_REQS, MAX_TOKENS * 4, MAX_TOKENS, max(draft_tokens, 1), 32, device)
    on = {"device": device}
    return seed(state, {
        "req_id_to_index": {},
        "num_computed_tokens_np": prompt.copy(),
        "num_computed_tokens_cpu": torch.tensor(prompt),  # 0.27.1: the plugin's own copy; later a view
        "num_computed_tokens": types.SimpleNamespace(gpu=torch.tensor(prompt, **on)),
        "prefill_len": types.SimpleNamespace(np=prompt.copy(), gpu=torch.tensor(prompt, **on)),
        "prompt_len": types.SimpleNamespace(np=prompt.copy()),
        "num_computed_prefill_tokens": prompt.copy(),
        "max_seq_len": np.full(MAX_REQS, MAX_TOKENS * 4, dtype=np.int32),
        "last_sampled_tokens": torch.zeros(MAX_REQS, 1, dtype=torch.int64, **on),
        "draft_tokens": torch.zeros(MAX_REQS, max(draft_tokens, 1), dtype=torch.int64, **on),
        "next_prefill_tokens": torch.zeros(MAX_REQS, dtype=torch.int32, **on),
        "all_token_ids": types.SimpleNamespace(gpu=torch.zeros(MAX_REQS, MAX_TOKENS * 4, dtype=torch.int32, **on)),
        "total_len": types.SimpleNamespace(gpu=torch.tensor(prompt, **on))})


def draft_speculator(draft_tokens: int, device: Any) -> Any:
    """The speculator of a speculative-decoding runner, for what core's sample_tokens
    asks of it; the draft model's forward is not run: it proposes fixed drafts, as
    the scripted sampler samples fixed tokens."""
    import torch

    def propose(input_batch: Any, *_: Any, **__: Any) -> Any:
        return torch.full((input_batch.num_reqs, draft_tokens), 7, dtype=torch.int64, device=device)

    return types.SimpleNamespace(supports_mm_inputs=False, replicated_pcp=False, propose=propose,
                                 draft_token_confidence_probs=None)


def _eplb_controller(runner: Any, run_call_site: Callable) -> Any:
    """The runner's EPLB controller, built by the plugin's __init__ call where the plugin
    has its own (AscendEPLBController, 182b75ea on), else by core's __init__ call."""
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner
    from vllm_ascend.worker.v2.model_runner import NPUModelRunner

    given = {"self": runner, "parallel_config": runner.parallel_config, "device": runner.device,
             "load_collection_phase": getattr(runner.ascend_config.eplb_config, "load_collection_phase", "all")}
    for init, callee in ((NPUModelRunner.__init__, "AscendEPLBController"), (GPUModelRunner.__init__, "EPLBController")):
        try:
            return run_call_site(init, callee, given)
        except LookupError:  # this __init__ builds no such controller
            continue
    raise LookupError("neither the plugin's nor core's runner __init__ builds an EPLB controller")


def build_runner(vllm_config: Any, run_call_site: Callable, *, draft_tokens: int) -> Any:
    """The Ascend MRV2 runner as a decode step reads it: made by its real __init__
    chain statement by statement (`new_runner`), then given the counting device's
    input buffers, streams and events and the core helpers that run per step."""
    import numpy as np
    import torch
    from vllm.v1.worker.gpu.kv_connector import get_kv_connector
    from vllm.v1.worker.gpu.sample.prompt_logprob import PromptLogprobsWorker
    from vllm.v1.worker.gpu.spec_decode.utils import DraftTokensHandler
    from vllm_ascend.ascend_config import get_ascend_config
    from vllm_ascend.worker.v2.input_batch import AscendInputBuffers
    from vllm_ascend.worker.v2.model_runner import NPUModelRunner
    from vllm_ascend.worker.v2.model_states.default import AscendModelState
    from vllm_ascend.worker.v2.states import AscendRequestState

    from device_counts import DEVICE

    runner, _ = new_runner(NPUModelRunner, vllm_config, DEVICE)
    # What a decode step on the counting device reads, replacing what __init__ made
    # (or could not make on the CPU).
    runner.vllm_config = vllm_config
    for name in ("model_config", "cache_config", "compilation_config", "lora_config", "load_config",
                 "parallel_config", "scheduler_config", "speculative_config", "observability_config"):
        setattr(runner, name, getattr(vllm_config, name, None))
    runner.ascend_config = get_ascend_config()
    # 0.23.0's sample_tokens waits for the output itself unless scheduling is async.
    runner.use_async_scheduling = vllm_config.scheduler_config.async_scheduling
    runner.device = DEVICE
    runner.max_num_reqs = MAX_REQS
    runner.num_speculative_steps = draft_tokens
    runner.decode_query_len = draft_tokens + 1
    runner.use_pp = False
    runner.pp_handler = None
    runner.is_first_pp_rank = runner.is_last_pp_rank = True
    runner.is_pooling_model = False
    runner.speculator = None  # no speculative config: no speculator (see below for draft tokens)
    runner.lora_config = None
    runner.kv_block_zeroer = None
    runner.execute_model_state = None
    # Core's ModelState class attributes (num_new_sampled_tokens_per_step) as the plugin's class has them.
    runner.model_state = object.__new__(AscendModelState)
    runner.model = types.SimpleNamespace(compute_logits=None)
    # What sample_tokens reads of the sampler besides sample() (0.30.0: the sampling
    # states it hands the speculator's propose).
    runner.sampler = types.SimpleNamespace(penalties_state=types.SimpleNamespace(output_bin_counts=None),
                                           sampling_states=types.SimpleNamespace(
                                               temperature=types.SimpleNamespace(gpu=None),
                                               seeds=types.SimpleNamespace(gpu=None)))
    runner.block_tables = types.SimpleNamespace(append_block_ids=lambda *a, **k: None,
                                                apply_staged_writes=lambda: None)
    runner.input_buffers = AscendInputBuffers(max_num_reqs=MAX_REQS, max_num_tokens=MAX_TOKENS, device=DEVICE)
    prompt = np.arange(10, 10 + MAX_REQS, dtype=np.int32)  # each request's prefill is done
    runner.req_states = request_state(AscendRequestState, DEVICE, draft_tokens=draft_tokens, prompt=prompt)
    if draft_tokens:
        # Speculative decoding: the runner's __init__s build a speculator whenever a
        # speculative config is set (the last PP rank); the draft model cannot run here.
        runner.speculator = draft_speculator(draft_tokens, DEVICE)
    # As NPUModelRunner.__init__ and GPUModelRunner.__init__ create them.
    runner.num_computed_tokens_event = torch.npu.Event()
    runner.num_computed_tokens_stream = torch.npu.Stream()
    runner.num_computed_tokens_cpu = torch.empty(MAX_REQS, dtype=torch.int32, device="cpu", pin_memory=True)
    # What the prefill step's postprocess left there: its copy of the device counts.
    runner.num_computed_tokens_cpu.copy_(torch.tensor(prompt))
    runner.output_copy_stream = torch.cuda.Stream(runner.device)
    runner.draft_tokens_handler = DraftTokensHandler(runner.device)
    runner.eplb = _eplb_controller(runner, run_call_site)
    # Built from its real signature: vLLM 0.31 added a required `device`.
    takes = inspect.signature(PromptLogprobsWorker.__init__).parameters
    runner.prompt_logprobs_worker = PromptLogprobsWorker(
        MAX_REQS, **({"device": runner.device} if "device" in takes else {}))
    runner.kv_connector = get_kv_connector(vllm_config, {})
    return runner


def _scheduler_output(req_ids: list[str], per_req: int, draft_tokens: int, computed: Any) -> Any:
    """A decode step's SchedulerOutput, from core's own empty one (its dataclasses,
    every field this core declares): only cached requests, each scheduled
    `per_req` tokens, `draft_tokens` of them drafts."""
    from vllm.v1.core.sched.output import CachedRequestData, SchedulerOutput

    out = SchedulerOutput.make_empty()
    cached = CachedRequestData.make_empty()
    cached.req_ids = list(req_ids)
    cached.num_computed_tokens = [int(n) for n in computed]
    cached.new_block_ids = [None] * len(req_ids)
    cached.new_token_ids = [[] for _ in req_ids]
    cached.num_output_tokens = [1] * len(req_ids)
    out.scheduled_cached_reqs = cached
    out.num_scheduled_tokens = {r: per_req for r in req_ids}
    out.total_num_scheduled_tokens = per_req * len(req_ids)
    out.scheduled_spec_decode_tokens = {r: [7] * draft_tokens for r in req_ids} if draft_tokens else {}
    return out


def _batch_req_state(execute_model: Callable, run_call_site: Callable, given: dict[str, Any]) -> dict[str, Any]:
    """The batch's CPU request state, where core's execute_model gathers one before
    prepare_inputs (0.30.0 on: `gather_batch_req_state`), by core's own call."""
    try:
        state, _ = run_call_site(execute_model, "gather_batch_req_state", {**given, "dummy_run": False},
                                 owner="self")
    except LookupError:  # this core's execute_model gathers none
        return {}
    return {"batch_req_state": state}


def _rejected(step: int, slot: int, draft_tokens: int) -> int:
    """Scripted rejections: with drafts, every other request rejects its draft every other step."""
    return 1 if draft_tokens and (step + slot) % 2 else 0


def run_decode(vllm_config: Any, run_call_site: Callable, *, switch_on: bool, draft_tokens: int = 0,
               kv_cache_config: Any = None) -> DecodeRun:
    """STEPS decode steps of BATCH requests; returns what the stubbed device was asked.
    `run_call_site` evaluates a caller's own call expression (the walker's)."""
    import numpy as np
    import torch
    from vllm.config import CUDAGraphMode
    from vllm.v1.worker.gpu import input_batch as core_input_batch
    from vllm.v1.worker.gpu import model_runner as core_runner_module
    from vllm.v1.worker.gpu.cudagraph_utils import BatchExecutionDescriptor
    from vllm.v1.worker.gpu.model_runner import ExecuteModelState, GPUModelRunner
    from vllm.v1.worker.gpu.sample.output import SamplerOutput
    from vllm_ascend.worker.v2 import model_runner as ascend_runner_module
    from vllm_ascend.worker.v2.model_runner import NPUModelRunner
    from vllm_ascend.worker.v2.utils import torch_cuda_wrapper

    from device_counts import DEVICE, counting_device

    execute_model = inspect.unwrap(GPUModelRunner.execute_model)  # its own globals, not the decorator's
    req_ids = [f"r{i}" for i in range(BATCH)]
    per_req = 1 + draft_tokens
    seen: list[list[int]] = []
    expected: list[list[int]] = []
    with counting_device(torch_cuda_wrapper) as counts, _switch(switch_on), \
            _replaced([core_runner_module, ascend_runner_module], cpu_kernels(counts, core_input_batch)):
        runner = build_runner(vllm_config, run_call_site, draft_tokens=draft_tokens)
        runner.kv_cache_config = kv_cache_config  # as initialize_kv_cache leaves it before the first step
        runner.req_states.req_id_to_index.update({r: i for i, r in enumerate(req_ids)})
        scheduler_view = runner.req_states.num_computed_tokens_np[:BATCH].copy()
        counts.total.clear()
        counts.sites.clear()  # building the runner is start-up, not a decode step
        for step in range(STEPS):
            with counts.device_kernel():
                device_now = runner.req_states.num_computed_tokens.gpu[:BATCH].tolist()
            expected.append([n + per_req for n in device_now])
            sched = _scheduler_output(req_ids, per_req, draft_tokens, scheduler_view)
            batch_desc = _make(BatchExecutionDescriptor, {"cg_mode": CUDAGraphMode.NONE,
                                                          "num_tokens": per_req * BATCH, "num_reqs": BATCH,
                                                          "num_active_loras": 0})
            run_call_site(execute_model, "update_requests", {"self": runner, "scheduler_output": sched})
            given = {"self": runner, "scheduler_output": sched, "batch_desc": batch_desc}
            given.update(_batch_req_state(execute_model, run_call_site, given))
            batch = run_call_site(execute_model, "prepare_inputs", given, owner="self")
            seen.append([int(n) for n in runner.input_buffers.seq_lens_np[:BATCH]])
            with counts.device_kernel():
                device_seq_lens = batch.seq_lens[:BATCH].tolist()
            if device_seq_lens != seen[-1]:
                raise RuntimeError(f"step {step + 1}: seq_lens_cpu {seen[-1]} but device seq_lens {device_seq_lens}")
            rejected = [_rejected(step, i, draft_tokens) for i in range(BATCH)]
            num_rejected = torch.tensor(rejected, dtype=torch.int32, device=DEVICE)
            num_sampled = torch.tensor([per_req - r for r in rejected], dtype=torch.int32, device=DEVICE)
            sampled = torch.ones(BATCH, per_req, dtype=torch.int64, device=DEVICE)
            output = _make(SamplerOutput, {"sampled_token_ids": sampled, "num_sampled": num_sampled,
                                           "num_rejected": num_rejected})
            runner.sample = lambda *a, **k: (output, num_sampled, num_rejected)
            runner.execute_model_state = _make(ExecuteModelState, {
                "input_batch": batch, "finished_req_ids": set(),
                "hidden_states": torch.zeros(per_req * BATCH, 8, device=DEVICE)})
            step_output = NPUModelRunner.sample_tokens(runner, None)
            if hasattr(step_output, "get_output"):  # an async output: the engine waits for it
                step_output.get_output()
            # The scheduler assumes every scheduled token was accepted (its
            # correction arrives with a later step's output): an optimistic mirror.
            scheduler_view += per_req
    return DecodeRun(counts.as_dict(), counts.site_list(), seen, expected)
