"""A counting stand-in for the NPU, for the smoke's decode steps (runs in the
composed environment: stdlib, numpy and torch only).

What it stands in for is cut from what the composed plugin and core's MRV2
runner call (grep of the composed trees at the pin, docs/series.md):

* streams and events: `torch.npu.Event/Stream/current_stream/default_stream/
  stream/set_stream/synchronize`, which the plugin's own `torch_cuda_wrapper()`
  also puts behind `torch.cuda.*` for core; `torch.accelerator.synchronize`.
  `Stream.wait_event`, `wait_stream` and `record_event` are built the way
  torch_npu's `torch_npu/npu/streams.py` builds them: `wait_stream(s)` is
  `wait_event(s.record_event())`, and `wait_event(e)` is `e.wait(stream)`, the
  one call that becomes a stream wait on the device (aclrtStreamWaitEvent).
  `Event.synchronize` is the host blocking on the device.
* device tensors: anything created on `DEVICE`, or copied there. A device
  tensor that reaches the host is one device-to-host copy, however it gets
  there: `.to("cpu")`, `.cpu()`, `host.copy_(device)`, or reading its values
  on the host (`.tolist()`, `.item()`, `.numpy()`, `int()`, `bool()`, numpy's
  `__array__`), each of which is a synchronous copy on an NPU.

Names of the counts follow the Ascend profiler's where one exists
(`acl_memcpy_device_to_host`, `wait_event`); the others say what they are.
"""

from __future__ import annotations

import contextlib
import traceback
from collections import Counter
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode

# The stubbed NPU: a CPU device with an index, so it differs from "cpu" while its
# tensors still live in host memory.
DEVICE = torch.device("cpu", 0)

D2H = "acl_memcpy_device_to_host"
H2D = "acl_memcpy_host_to_device"
WAIT_EVENT = "wait_event"
RECORD_EVENT = "record_event"
EVENT_SYNC = "event_synchronize"
STREAM_SYNC = "stream_synchronize"
DEVICE_SYNC = "device_synchronize"
NAMES = (D2H, WAIT_EVENT, EVENT_SYNC, STREAM_SYNC, DEVICE_SYNC, RECORD_EVENT, H2D)

# Reading a device tensor's values on the host (each is a synchronous D2H copy).
HOST_READS = {"tolist", "item", "numpy", "__array__", "__index__", "__int__", "__bool__", "__float__"}


class DeviceTensor(torch.Tensor):
    """A tensor on the stubbed NPU; torch keeps the type through every operation."""


def is_device(value: Any) -> bool:
    return isinstance(value, DeviceTensor)


def _is_stub(device: Any) -> bool:
    if device is None or isinstance(device, (torch.dtype, torch.Tensor)):
        return False
    try:
        return torch.device(device) == DEVICE
    except (TypeError, RuntimeError):
        return False


def _is_host(device: Any) -> bool:
    if device is None or isinstance(device, (torch.dtype, torch.Tensor)):
        return False
    try:
        return torch.device(device) == torch.device("cpu")
    except (TypeError, RuntimeError):
        return False


def _site() -> str:
    """file:line of the innermost vllm or vllm_ascend frame that made the call."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        for marker in ("/vllm_ascend/", "/vllm/"):
            if marker in frame.filename:
                return f"{marker.strip('/')}/{frame.filename.split(marker, 1)[1]}:{frame.lineno}"
    return "smoke"


class Counts:
    """What the stubbed device was asked to do: totals and the call sites."""

    def __init__(self) -> None:
        self.total: Counter[str] = Counter()
        self.sites: Counter[tuple[str, str]] = Counter()
        self._paused = 0

    def add(self, name: str) -> None:
        if self._paused:
            return
        self.total[name] += 1
        self.sites[(name, _site())] += 1

    @contextlib.contextmanager
    def device_kernel(self) -> Iterator[None]:
        """A CPU stand-in for a device kernel: its reads are on the device, not transfers."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def as_dict(self) -> dict[str, int]:
        return {name: self.total.get(name, 0) for name in NAMES}

    def site_list(self) -> list[dict[str, Any]]:
        return [{"name": n, "site": s, "count": c} for (n, s), c in sorted(self.sites.items())]


class _TensorTraffic(TorchFunctionMode):
    """Tags tensors made on DEVICE and counts every crossing between host and device."""

    def __init__(self, counts: Counts):
        super().__init__()
        self.counts = counts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if name == "pin_memory":  # pinned host memory needs an accelerator here
            return args[0]
        if name == "record_stream":  # the caching allocator's bookkeeping
            return None
        kwargs.pop("pin_memory", None)
        first = args[0] if args else None
        if name in HOST_READS and is_device(first):
            self.counts.add(D2H)
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **kwargs)
        if name in ("to", "cpu") and isinstance(first, torch.Tensor):
            return self._move(func, name, first, args, kwargs)
        if name == "copy_" and len(args) >= 2:
            dst, src = args[0], args[1]
            if is_device(src) and not is_device(dst):
                self.counts.add(D2H)
            elif is_device(dst) and not is_device(src):
                self.counts.add(H2D)
            return func(*args, **kwargs)
        if _is_stub(kwargs.get("device")):
            kwargs["device"] = "cpu"
            return func(*args, **kwargs).as_subclass(DeviceTensor)
        return func(*args, **kwargs)

    def _move(self, func, name, tensor, args, kwargs):
        target = "cpu" if name == "cpu" else kwargs.get("device", args[1] if len(args) > 1 else None)
        if is_device(tensor) and (name == "cpu" or _is_host(target)):
            self.counts.add(D2H)
            with torch._C.DisableTorchFunctionSubclass():
                out = func(*args, **kwargs)
            # The stub device is host memory, so torch hands back the tensor itself:
            # make it the host copy it would be.
            return out.as_subclass(torch.Tensor).clone() if out is tensor or is_device(out) else out
        if not is_device(tensor) and _is_stub(target):
            self.counts.add(H2D)
            kwargs.pop("device", None)
            rest = [a for a in args[2:]]
            return tensor.to(*rest, **{k: v for k, v in kwargs.items() if k != "non_blocking"}
                             ).clone().as_subclass(DeviceTensor)
        return func(*args, **kwargs)


class Event:
    """torch_npu.npu.Event as the runner uses it."""

    def __init__(self, counts: Counts, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        self._counts = counts

    def record(self, stream: Any = None) -> None:
        self._counts.add(RECORD_EVENT)

    def wait(self, stream: Any = None) -> None:
        self._counts.add(WAIT_EVENT)

    def synchronize(self) -> None:
        self._counts.add(EVENT_SYNC)

    def query(self) -> bool:
        return True

    def elapsed_time(self, end_event: Any) -> float:
        return 0.0


class Stream:
    """torch_npu.npu.Stream: wait_event, wait_stream and record_event as torch_npu defines them."""

    def __init__(self, counts: Counts, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self._counts = counts

    def wait_event(self, event: Event) -> None:
        event.wait(self)

    def wait_stream(self, stream: "Stream") -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        if event is None:
            event = Event(self._counts)
        event.record(self)
        return event

    def synchronize(self) -> None:
        self._counts.add(STREAM_SYNC)

    def query(self) -> bool:
        return True


class StubNpu:
    """The stream/event part of `torch.npu`, counting; `install` puts it in place."""

    def __init__(self, counts: Counts):
        self.counts = counts
        self.default = Stream(counts)
        self.current = self.default

    def Event(self, *args: Any, **kwargs: Any) -> Event:  # noqa: N802 - torch.npu's name
        return Event(self.counts, *args, **kwargs)

    def Stream(self, *args: Any, **kwargs: Any) -> Stream:  # noqa: N802 - torch.npu's name
        return Stream(self.counts, *args, **kwargs)

    def current_stream(self, device: Any = None) -> Stream:
        return self.current

    def default_stream(self, device: Any = None) -> Stream:
        return self.default

    def set_stream(self, stream: Stream) -> None:
        self.current = stream

    @contextlib.contextmanager
    def stream(self, stream: Stream | None) -> Iterator[None]:
        before = self.current
        if stream is not None:
            self.current = stream
        try:
            yield
        finally:
            self.current = before

    def synchronize(self, device: Any = None) -> None:
        self.counts.add(DEVICE_SYNC)

    def current_device(self) -> int:
        return 0


NPU_NAMES = ("Event", "Stream", "current_stream", "default_stream", "set_stream", "stream", "synchronize",
             "current_device")


@contextlib.contextmanager
def counting_device(torch_cuda_wrapper: Any = None) -> Iterator[Counts]:
    """Within: torch.npu's streams and events count, tensors on DEVICE count their
    transfers, and (given the plugin's torch_cuda_wrapper) torch.cuda's names point
    at torch.npu's as the plugin makes them point on an NPU host. All restored after."""
    counts = Counts()
    stub = StubNpu(counts)
    npu = torch.npu
    saved_npu = {n: getattr(npu, n) for n in NPU_NAMES if n in vars(npu) or hasattr(npu, n)}
    saved_cuda = dict(vars(torch.cuda))
    saved_accel_sync = getattr(torch.accelerator, "synchronize", None)
    try:
        for n in NPU_NAMES:
            setattr(npu, n, getattr(stub, n))
        if torch_cuda_wrapper is not None:
            with torch_cuda_wrapper():
                pass  # it assigns torch.cuda.* and never restores: the state it leaves is the point
        if saved_accel_sync is not None:
            torch.accelerator.synchronize = stub.synchronize
        with _TensorTraffic(counts):
            yield counts
    finally:
        for n, value in saved_npu.items():
            setattr(npu, n, value)
        for n in set(vars(torch.cuda)) - set(saved_cuda):
            delattr(torch.cuda, n)
        for n, value in saved_cuda.items():
            if vars(torch.cuda).get(n) is not value:
                setattr(torch.cuda, n, value)
        if saved_accel_sync is not None:
            torch.accelerator.synchronize = saved_accel_sync
