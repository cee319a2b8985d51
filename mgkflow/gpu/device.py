"""The CUDA device layer: context, compilation with caches, occupancy and typed launches.

Everything in :mod:`mgkflow.gpu` that talks to PyCUDA goes through this module:

* :func:`ensure_context` creates (once) a context on ``$MGKFLOW_DEVICE`` (default 0) or
  reuses the current one;
* :func:`build_modules` compiles generated sources once per process (keyed by the caller's
  key and the architecture) and on disk through PyCUDA's cache
  (``$MGKFLOW_CUDA_CACHE`` or ``~/.cache/mgkflow/cuda``): the missing modules of one request
  list go to nvcc side by side (a thread pool; nvcc needs no CUDA context) and are loaded in
  the calling thread, which holds the context. A key is compiled by one thread at a time
  (another thread wanting it waits for that compile), different keys concurrently;
  :func:`build_module` is the one-module case; :func:`compile_count` says how many sources
  this process handed to the compiler;
* :func:`blocks_per_sm` is the one occupancy estimate (registers, threads, shared memory);
* :class:`Module` / :class:`Kernel` wrap a compiled module: a kernel knows the parameter
  list declared in its source (:func:`parse_signatures`) and a launch passes arguments BY
  NAME; they are checked (missing or unknown names, pointer or scalar, element dtype of a
  :class:`DeviceArray`, scalar width and range) and put in declaration order, so host and
  source cannot drift apart. :meth:`Module.set_constant` fills a ``__constant__`` array
  (the kernels' run-time hyperparameters).

PyCUDA is imported on first use (:func:`driver`), never at import time: the signature
parser and the occupancy arithmetic run without a GPU (and tests substitute a fake driver
in ``sys.modules``; :func:`reset` drops the caches between them).

Examples
--------
>>> sig = parse_signatures('extern "C" __global__ void f(const double* __restrict__ x, const int n) {}')
>>> [(p.name, p.kind) for p in sig["f"]]
[('x', 'P'), ('n', 'i')]
>>> blocks_per_sm(regs=64, block=512, smem=0, limits=DeviceLimits("x", 132, 2048, 65536, 233472, 232448))
2
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "driver", "ensure_context", "device_arch", "DeviceLimits", "device_limits", "blocks_per_sm", "build_module",
    "build_modules", "ModuleRequest", "compile_count", "reset", "Param", "parse_signatures", "Kernel", "Module",
    "offset", "DeviceArray", "upload", "needs_smem_optin", "SMEM_DEFAULT_LIMIT",
]  # fmt: skip

# "building": {full key: Event set when the thread compiling that module is done (loaded or failed)}
_state: dict[str, Any] = {
    "context": None, "modules": {}, "building": {}, "compiles": 0, "limits": None, "arch": None,
}  # fmt: skip
_CONTEXT_LOCK = threading.Lock()
#: Guards ``_state["modules"]``, ``_state["building"]`` and the compile count; never held during a compile.
_COMPILE_LOCK = threading.Lock()
#: nvcc processes one :func:`build_modules` call runs at once (at most; and at most the CPU count).
COMPILE_WORKERS = 8
#: nvcc options of every module (``-use_fast_math`` was measured no faster: mgkflow/gpu/NOTES.md).
NVCC_OPTIONS = ("-O3", "-std=c++17")


def driver() -> Any:
    """``pycuda.driver`` (imported on demand; whatever ``sys.modules`` holds, so fakes work)."""
    import pycuda.driver as cuda

    return cuda


def reset() -> None:
    """Forget the context, the compiled modules and the device limits (tests with fake drivers)."""
    _state.update(context=None, modules={}, building={}, compiles=0, limits=None, arch=None)


def ensure_context() -> Any:
    """Create (once) a context on device ``$MGKFLOW_DEVICE`` (default 0) or reuse the current one, and
    make it current in the calling thread (PyCUDA contexts are per thread: a second solver thread, or a
    Dask worker's second task thread, starts without one; it keeps the context from then on)."""
    ctx = _state["context"]
    if ctx is None:
        with _CONTEXT_LOCK:  # two threads starting at once: one creates it
            ctx = _state["context"]
            if ctx is None:
                return _create_context()
    if hasattr(ctx, "push") and driver().Context.get_current() is None:
        _push_here(ctx)
    return ctx


#: Per thread: what pops the context a thread other than the main one pushed, when that thread ends.
_THREAD = threading.local()


class _PopAtThreadExit:
    """Pops the context off its thread's stack when the thread ends (its thread-local storage is dropped
    on that thread, before PyCUDA's own per-thread cleanup, which aborts the process on a non-empty stack:
    a Dask worker's task threads at shutdown)."""

    def __init__(self, ctx: Any) -> None:
        self.ctx, self.ident = ctx, threading.get_ident()

    def __del__(self) -> None:
        if threading.get_ident() != self.ident:  # never another thread's stack
            return
        try:
            self.ctx.pop()
        except Exception:  # noqa: BLE001 - popped already, or the driver is shutting down
            pass


def _push_here(ctx: Any) -> None:
    """Make ``ctx`` current in this thread; a thread other than the main one pops it again when it ends."""
    ctx.push()
    if threading.current_thread() is not threading.main_thread():
        _THREAD.pop_at_exit = _PopAtThreadExit(ctx)


def _create_context() -> Any:
    cuda = driver()
    cuda.init()
    ctx = cuda.Context.get_current()
    if ctx is None:
        dev = cuda.Device(int(os.environ.get("MGKFLOW_DEVICE", "0")))
        ctx = dev.retain_primary_context()
        _push_here(ctx)
        import atexit

        if threading.current_thread() is threading.main_thread():

            def _pop() -> None:
                try:
                    ctx.pop()
                except Exception:  # noqa: BLE001 - interpreter shutdown
                    pass

            atexit.register(_pop)
        atexit.register(_free_modules, ctx)  # (before _pop: atexit runs the last registered first)
    _state["context"] = ctx
    return ctx


def _free_modules(ctx: Any) -> None:
    """At exit: unload the cached modules with ``ctx`` current in this thread. Left to the interpreter's
    teardown, PyCUDA frees them without their context and warns for each ("module in out-of-thread
    context could not be cleaned up": one line per Dask worker after a screen, NOTES S24-G)."""
    import gc

    try:
        cuda = driver()
        pushed = cuda.Context.get_current() is None
        if pushed:
            ctx.push()
        with _COMPILE_LOCK:
            _state["modules"] = {}
        gc.collect()
        if pushed:
            cuda.Context.pop()
    except Exception:  # noqa: BLE001 - interpreter shutdown: nothing more to do
        pass


def device_arch() -> str:
    """``sm_XY`` of the current device."""
    if _state.get("arch") is None:
        major, minor = driver().Context.get_device().compute_capability()
        _state["arch"] = f"sm_{major}{minor}"
    return _state["arch"]


@dataclass(frozen=True)
class DeviceLimits:
    """What the occupancy estimate and the launch plans need to know of a device."""

    name: str
    n_sm: int
    threads_per_sm: int
    regs_per_sm: int
    smem_per_sm: int
    smem_optin: int


def device_limits() -> DeviceLimits:
    """:class:`DeviceLimits` of the current device (read once per context; the context is made current
    in the calling thread every time)."""
    ensure_context()
    if _state["limits"] is None:
        cuda = driver()
        dev = cuda.Context.get_device()
        A = cuda.device_attribute
        _state["limits"] = DeviceLimits(
            name=str(dev.name()),
            n_sm=int(dev.get_attribute(A.MULTIPROCESSOR_COUNT)),
            threads_per_sm=int(dev.get_attribute(A.MAX_THREADS_PER_MULTIPROCESSOR)),
            regs_per_sm=int(dev.get_attribute(A.MAX_REGISTERS_PER_MULTIPROCESSOR)),
            smem_per_sm=int(dev.get_attribute(A.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)),
            smem_optin=int(dev.get_attribute(A.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)),
        )
    return _state["limits"]


def blocks_per_sm(
    regs: int, block: int, smem: int = 0, static_smem: int = 0, limits: DeviceLimits | None = None, cap: int = 32
) -> int:
    """Resident blocks per SM of a kernel: the minimum over registers (allocated per warp in
    units of 256), threads and shared memory (1 KiB reserved per block), at least 1.

    Parameters
    ----------
    regs : int
        Registers per thread (``func.num_regs``).
    block : int
        Threads per block.
    smem, static_smem : int
        Dynamic and static shared memory per block (bytes).
    limits : DeviceLimits, optional
        Default: the current device's.
    cap : int
        Upper bound (the hardware's 32 blocks per SM).
    """
    lim = limits or device_limits()
    warps = max(1, int(block) // 32)
    regs_per_block = ((max(int(regs), 1) * 32 + 255) // 256) * 256 * warps
    by_regs = lim.regs_per_sm // max(regs_per_block, 1)
    by_threads = lim.threads_per_sm // max(int(block), 1)
    by_smem = lim.smem_per_sm // (int(smem) + int(static_smem) + 1024)
    return max(1, min(by_regs, by_threads, by_smem, int(cap)))


#: Shared memory (static and dynamic together, bytes) a block may take without the function's opt-in.
SMEM_DEFAULT_LIMIT = 48 * 1024


def needs_smem_optin(kernel: Any, smem: int) -> bool:
    """Whether a launch of ``kernel`` with ``smem`` bytes of dynamic shared memory needs the function's
    MAX_DYNAMIC_SHARED_SIZE_BYTES raised: its static and dynamic shared memory together exceed 48 KiB.
    (The static part counts: 48,936 dynamic bytes beside 336 static ones fail to launch without it.)

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> k = SimpleNamespace(shared_size_bytes=336)
    >>> needs_smem_optin(k, 48 * 1024 - 336), needs_smem_optin(k, 48 * 1024 - 335)
    (False, True)
    """
    return int(smem) + int(getattr(kernel, "shared_size_bytes", 0) or 0) > SMEM_DEFAULT_LIMIT


def kernel_blocks_per_sm(kernel: Any, block: int, smem: int = 0, cap: int = 32) -> int:
    """:func:`blocks_per_sm` of a compiled kernel (its registers and static shared memory)."""
    return blocks_per_sm(int(kernel.num_regs), block, smem, int(getattr(kernel, "shared_size_bytes", 0)), cap=cap)


def _cache_dir() -> str | None:
    path = os.environ.get("MGKFLOW_CUDA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mgkflow", "cuda")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    return path


def compile_count() -> int:
    """Sources this process handed to the compiler (process-cache misses) since :func:`reset`."""
    return int(_state["compiles"])


#: One module wanted: (a callable giving its CUDA source, called on a miss only; the caller's key).
ModuleRequest = tuple[Callable[[], str], tuple]


def build_module(source: Callable[[], str], key: tuple) -> Module:
    """The module of one source: :func:`build_modules` of the single request ``(source, key)``."""
    return build_modules([(source, key)])[0]


def build_modules(requests: Sequence[ModuleRequest]) -> list[Module]:
    """Compile (or fetch) CUDA modules for the current device, the missing ones concurrently.

    Each module is cached per process under its key plus the architecture, and on disk by
    PyCUDA's cache. The sources this call has to compile go to ``pycuda.compiler.compile`` (nvcc
    with ``NVCC_OPTIONS``, a subprocess: no CUDA context needed) in a thread pool; each cubin is
    then loaded here (``pycuda.driver.module_from_buffer``, in the calling thread, which holds the
    context), in request order, while the later ones may still compile. A module another thread
    is compiling is waited for, not compiled twice; if that compile fails, this call compiles it.

    Parameters
    ----------
    requests : sequence of (source, key)
        ``source()`` gives the CUDA source (called on a miss only, in a worker thread); ``key``
        (a hashable tuple) names the module. Repeated keys are compiled once.

    Returns
    -------
    list of Module
        One per request, in order.

    Raises
    ------
    Exception
        The first failure of this call's compiles or loads (``pycuda.driver.CompileError`` with
        nvcc's output for a source that does not compile), after the others were loaded.
    """
    ensure_context()
    arch = device_arch()
    wanted = [((*key, arch), source) for source, key in requests]
    while True:
        modules = _state["modules"]
        missing = {k: src for k, src in wanted if k not in modules}
        if not missing:
            return [modules[k] for k, _ in wanted]
        with _COMPILE_LOCK:  # claim the missing modules nobody is compiling; wait for the others
            building = _state["building"]
            theirs = [building[k] for k in missing if k in building]
            mine = {k: src for k, src in missing.items() if k not in modules and k not in building}
            for k in mine:
                building[k] = threading.Event()
        if mine:
            _compile_and_load(mine, arch)
        for done in theirs:  # then loop: a failed compile of another thread is claimed again
            done.wait()


def _compile_source(source: Callable[[], str], arch: str, cache_dir: str | None) -> tuple[str, bytes]:
    """(source text, cubin) of one request: runs in a worker thread (nvcc in a subprocess)."""
    from pycuda.compiler import compile as nvcc_compile

    text = source()
    cubin = nvcc_compile(text, arch=arch, options=list(NVCC_OPTIONS), no_extern_c=True, cache_dir=cache_dir)
    return text, cubin


def _compile_and_load(claimed: dict[tuple, Callable[[], str]], arch: str) -> None:
    """Compile the ``claimed`` modules concurrently, load each in this thread, and release the claims
    (also on failure: waiting threads then retry). Raises the first failure after loading the rest."""
    error: BaseException | None = None
    try:
        cache_dir = _cache_dir()
        workers = max(1, min(len(claimed), COMPILE_WORKERS, os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mgkflow-nvcc") as pool:
            futures = {k: pool.submit(_compile_source, src, arch, cache_dir) for k, src in claimed.items()}
            for k, fut in futures.items():
                try:
                    text, cubin = fut.result()
                    mod = Module(driver().module_from_buffer(cubin), text)
                except Exception as exc:  # noqa: BLE001 - raised below, once every claim is settled
                    error = error or exc
                    continue
                with _COMPILE_LOCK:
                    _state["modules"][k] = mod
                    _state["compiles"] += 1
                    done = _state["building"].pop(k, None)
                if done is not None:
                    done.set()
    finally:
        with _COMPILE_LOCK:  # claims not settled above (failures, or an interrupt)
            left = [_state["building"].pop(k) for k in claimed if k in _state["building"]]
        for done in left:
            done.set()
    if error is not None:
        raise error


# ---------------------------------------------------------------------------------------- signatures
_KERNEL_RE = re.compile(
    r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?(\w+)\s*\((.*?)\)\s*\{', re.S
)
_TYPEDEF_RE = re.compile(r"typedef\s+([\w ]+?)\s+(\w+)\s*;")
#: Object-like macros (name, body; continuation lines joined): parameter groups such as MGK_JOB_PARAMS.
_DEFINE_RE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(.*)$", re.M)
_SCALAR_KINDS = {"int": "i", "long long": "q", "double": "d", "float": "f", "unsigned int": "u"}
_KIND_DTYPE = {"i": np.int32, "q": np.int64, "d": np.float64, "f": np.float32, "u": np.uint32}
_POINTEE_DTYPE = {
    "int": np.int32, "unsigned int": np.uint32, "double": np.float64, "float": np.float32, "long long": np.int64,
    "unsigned long long": np.uint64, "unsigned char": np.uint8, "int2": np.int32, "int4": np.int32,
}  # fmt: skip


@dataclass(frozen=True)
class Param:
    """One kernel parameter: C type (typedefs resolved, ``const``/``__restrict__`` dropped) and name.

    ``kind`` is "P" for a pointer, else the scalar kind: "i" int32, "q" int64, "d" double,
    "f" float, "u" uint32. ``dtype`` is the element dtype of a pointer (None when unknown).
    """

    ctype: str
    name: str

    @property
    def kind(self) -> str:
        if "*" in self.ctype:
            return "P"
        try:
            return _SCALAR_KINDS[self.ctype]
        except KeyError:
            raise TypeError(f"unsupported kernel parameter type {self.ctype!r} ({self.name})") from None

    @property
    def dtype(self) -> np.dtype | None:
        if "*" not in self.ctype:
            return np.dtype(_KIND_DTYPE[self.kind])
        dt = _POINTEE_DTYPE.get(self.ctype.replace("*", "").strip())
        return None if dt is None else np.dtype(dt)


def parse_signatures(source: str) -> dict[str, tuple[Param, ...]]:
    """{kernel name: parameters} of the ``extern "C" __global__`` kernels of a CUDA source.

    Typedefs are resolved, and object-like ``#define`` macros in a parameter list are expanded
    (the parameter groups of ``mgk_common.cuh``).

    Examples
    --------
    >>> src = 'typedef float w_t;\\nextern "C" __global__ void k(const w_t* w, long long n) {}'
    >>> [(p.ctype, p.kind, str(p.dtype)) for p in parse_signatures(src)["k"]]
    [('float*', 'P', 'float32'), ('long long', 'q', 'int64')]
    >>> src = '#define OUT double* out, \\\\\\n  const int n\\nextern "C" __global__ void k(const int* a, OUT) {}'
    >>> [p.name for p in parse_signatures(src)["k"]]
    ['a', 'out', 'n']
    """
    text = re.sub(r"/\*.*?\*/", " ", re.sub(r"//[^\n]*", "", source), flags=re.S)
    typedefs = {alias: base.strip() for base, alias in _TYPEDEF_RE.findall(text)}
    macros = dict(_DEFINE_RE.findall(text.replace("\\\n", " ")))
    out = {}
    for name, params in _KERNEL_RE.findall(text):
        for _ in range(8):  # object-like macros in the parameter list (parameter groups), nested a few deep
            expanded = re.sub(r"\b\w+\b", lambda m: macros.get(m.group(0), m.group(0)), params)
            if expanded == params:
                break
            params = expanded
        plist = []
        for p in params.split(","):
            p = " ".join(re.sub(r"\b(const|__restrict__)\b", " ", p).split())
            if not p:
                continue
            m = re.match(r"(.*?)\s*(\w+)$", p)
            if m is None:
                raise ValueError(f"cannot parse parameter {p!r} of kernel {name}")
            ctype, pname = m.group(1).strip(), m.group(2)
            stars = ctype.count("*")
            base = ctype.replace("*", "").strip()
            base = typedefs.get(base, base)
            plist.append(Param(base + "*" * stars, pname))
        out[name] = tuple(plist)
    return out


@dataclass
class DeviceArray:
    """A device allocation with the dtype and length it was uploaded with (checked at launch)."""

    alloc: Any
    dtype: np.dtype
    size: int

    def __int__(self) -> int:
        return int(self.alloc)


def offset(alloc: Any, nbytes: int, dtype: Any, size: int) -> DeviceArray:
    """The stretch of a device allocation ``nbytes`` in, as a :class:`DeviceArray` of ``size`` elements
    (the typed launch path passes its address on as the pointer argument).

    Examples
    --------
    >>> a = offset(4096, 16, np.float64, 3)
    >>> int(a), a.size
    (4112, 3)
    """
    return DeviceArray(np.uintp(int(alloc) + int(nbytes)), np.dtype(dtype), int(size))


def upload(array: np.ndarray) -> DeviceArray:
    """Copy a host array to the device (contiguous) as a :class:`DeviceArray`."""
    a = np.ascontiguousarray(array)
    return DeviceArray(driver().to_device(a), a.dtype, int(a.size))


def _check_arg(kernel: str, p: Param, v: Any) -> Any:
    where = f"{kernel}({p.name}: {p.ctype})"
    if p.kind == "P":
        if isinstance(v, bool | int | float | np.number) or v is None:
            raise TypeError(f"internal: {where} expects a device allocation, got {v!r}")
        if isinstance(v, DeviceArray):
            want = p.dtype
            if want is not None and v.dtype != want:
                raise TypeError(f"internal: {where} expects {want} elements, got a device array of {v.dtype}")
            return v.alloc
        return v
    if not isinstance(v, int | float | np.number) or isinstance(v, bool):
        raise TypeError(f"internal: {where} expects a scalar, got {type(v).__name__}")
    dt = p.dtype
    if dt.kind in "iu":
        if isinstance(v, float | np.floating):
            raise TypeError(f"internal: {where} expects an integer, got {v!r}")
        info = np.iinfo(dt)
        if not info.min <= int(v) <= info.max:
            raise OverflowError(f"internal: {where} value {v} out of {dt} range")
        return dt.type(int(v))
    return dt.type(v)


class Kernel:
    """A compiled kernel with its declared parameters; call it with arguments by name.

    ``kernel(grid=(g, 1), block=(b, 1, 1), shared=bytes, x=..., n=...)`` checks every
    argument against the declaration (see :func:`parse_signatures`) and launches.
    """

    def __init__(self, func: Any, name: str, params: tuple[Param, ...]) -> None:
        self.func = func
        self.name = name
        self.params = params
        self._names = tuple(p.name for p in params)
        self._name_set = frozenset(self._names)
        # checked once per (kernel, signature): per parameter, the expected pointer dtype or scalar type
        self._ptr_dtype = tuple(p.dtype if p.kind == "P" else None for p in params)
        self._is_ptr = tuple(p.kind == "P" for p in params)

    @property
    def num_regs(self) -> int:
        return int(self.func.num_regs)

    @property
    def shared_size_bytes(self) -> int:
        return int(getattr(self.func, "shared_size_bytes", 0))

    def set_attribute(self, attr: Any, value: int) -> None:
        self.func.set_attribute(attr, value)

    def args(self, values: Mapping[str, Any]) -> tuple:
        """The positional, typed argument tuple of ``values`` (checked; see the class docstring)."""
        if len(values) != len(self._names) or not self._name_set.issuperset(values):
            missing = [n for n in self._names if n not in values]
            extra = sorted(set(values) - self._name_set)
            raise TypeError(f"internal: {self.name} arguments: missing {missing}, unknown {extra}")
        out = []
        for p, is_ptr, want in zip(self.params, self._is_ptr, self._ptr_dtype, strict=True):
            v = values[p.name]
            if is_ptr and type(v) is DeviceArray and (want is None or v.dtype == want):
                out.append(v.alloc)  # the common case, checked inline
            else:
                out.append(_check_arg(self.name, p, v))
        return tuple(out)

    def __call__(self, *, grid: tuple, block: tuple, shared: int = 0, stream: Any = None, **values: Any) -> None:
        kw = {} if stream is None else {"stream": stream}  # launch on ``stream`` (default: the legacy stream)
        self.func(*self.args(values), block=tuple(int(b) for b in block), grid=tuple(int(g) for g in grid),
                  shared=int(shared), **kw)  # fmt: skip


class Module:
    """A compiled module: :meth:`function` gives typed :class:`Kernel` objects."""

    def __init__(self, raw: Any, source: str) -> None:
        self.raw = raw
        self.signatures = parse_signatures(source)
        self._kernels: dict[str, Kernel] = {}
        self._constants: dict[str, bytes] = {}

    def function(self, name: str) -> Kernel:
        k = self._kernels.get(name)
        if k is None:
            if name not in self.signatures:
                raise KeyError(f'internal: no extern "C" kernel {name!r} in the module')
            k = self._kernels[name] = Kernel(self.raw.get_function(name), name, self.signatures[name])
        return k

    def set_constant(self, name: str, values: np.ndarray) -> None:
        """Copy ``values`` into the ``__constant__`` array ``name`` (skipped when unchanged)."""
        data = np.ascontiguousarray(values)
        blob = data.tobytes()
        if self._constants.get(name) == blob:
            return
        ptr, size = self.raw.get_global(name)
        if int(size) != data.nbytes:
            raise ValueError(f"internal: __constant__ {name} holds {size} bytes, got {data.nbytes}")
        driver().memcpy_htod(ptr, data)
        self._constants[name] = blob
