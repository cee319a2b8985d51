"""Module builds of mgkflow.gpu.device on the fake PyCUDA of test_wide.py (no GPU needed): one compile per
key across threads, different keys compiled concurrently (a call's modules in a thread pool, loaded in the
calling thread), failed compiles released; GPUBackend.solve builds only the modules its pairs use."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from test_gpu_compact import CASES, BlockStub, CompactModule, _molecule
from test_wide import FakeAlloc, fake_backend  # noqa: F401  (fixture)

from mgkflow.backends.exact import solve_pair
from mgkflow.gpu import device
from mgkflow.gpu.solvers import compact
from mgkflow.system import prepare_graph

SOURCE = 'extern "C" __global__ void k(const double* __restrict__ x, const int n) {}\n'


class RawModule:
    """What ``module_from_buffer`` gives on the fake driver: one kernel ``k``; records the loading thread."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.thread = threading.get_ident()

    def get_function(self, name: str) -> Any:
        return type("Func", (), {"num_regs": 32, "shared_size_bytes": 0})()

    def get_global(self, name: str) -> tuple[FakeAlloc, int]:
        return FakeAlloc(8), 8


def _source(tag: str) -> Any:
    return lambda: f"// {tag}\n{SOURCE}"


def _compiler(wrap: Any) -> list[str]:
    """Install ``wrap(real_compile)`` as the fake ``pycuda.compiler.compile`` and :class:`RawModule` as the
    fake module factory; the list of sources handed to the compiler (in call order)."""
    compiler = sys.modules["pycuda.compiler"]
    real, calls = compiler.compile, []

    def counted(source: str, **kw: Any) -> bytes:
        calls.append(source)
        return wrap(real)(source, **kw)

    compiler.compile = counted
    compiler.factory = RawModule
    return calls


def test_same_key_from_two_threads_compiles_once(fake_backend) -> None:  # noqa: F811
    """A thread wanting a module another thread is compiling waits for it: one compile, one Module."""
    entered, release = threading.Event(), threading.Event()

    def slow(real: Any) -> Any:
        def compile_source(source: str, **kw: Any) -> bytes:
            entered.set()
            assert release.wait(5), "never released"
            return real(source, **kw)

        return compile_source

    calls = _compiler(slow)
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(device.build_module, _source("a"), ("same",))
        assert entered.wait(5)
        second = pool.submit(device.build_module, _source("a"), ("same",))
        time.sleep(0.1)  # the second call finds the key being compiled
        release.set()
        a, b = first.result(10), second.result(10)
    assert a is b and len(calls) == 1 and device.compile_count() == 1
    assert device.build_module(_source("a"), ("same",)) is a and device.compile_count() == 1


def test_different_keys_from_two_threads_compile_concurrently(fake_backend) -> None:  # noqa: F811
    """Two threads compiling different modules do not wait for each other: each compile waits on a barrier
    the other must reach meanwhile (a lock held over compiles would break it after the timeout)."""
    barrier = threading.Barrier(2, timeout=3)

    def meet(real: Any) -> Any:
        def compile_source(source: str, **kw: Any) -> bytes:
            barrier.wait()
            return real(source, **kw)

        return compile_source

    calls = _compiler(meet)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futs = [pool.submit(device.build_module, _source(tag), (tag,)) for tag in ("x", "y")]
        mods = [f.result(10) for f in futs]
    assert [m.raw.src.split("\n")[0] for m in mods] == ["// x", "// y"]
    assert len(calls) == 2 and device.compile_count() == 2


def test_build_modules_compiles_a_calls_modules_concurrently(fake_backend) -> None:  # noqa: F811
    """One build_modules call: the missing modules compile side by side in worker threads (the barrier of
    two), are loaded in the calling thread, returned in request order (a repeated key once); a second call
    compiles nothing."""
    barrier = threading.Barrier(2, timeout=3)
    compile_threads: list[int] = []

    def meet(real: Any) -> Any:
        def compile_source(source: str, **kw: Any) -> bytes:
            compile_threads.append(threading.get_ident())
            barrier.wait()
            return real(source, **kw)

        return compile_source

    calls = _compiler(meet)
    requests = [(_source("p"), ("p",)), (_source("q"), ("q",)), (_source("p"), ("p",))]
    mods = device.build_modules(requests)
    me = threading.get_ident()
    assert mods[0] is mods[2] and mods[0] is not mods[1]
    assert [m.raw.src.split("\n")[0] for m in mods] == ["// p", "// q", "// p"]
    assert len(calls) == 2 and device.compile_count() == 2
    assert me not in compile_threads and all(m.raw.thread == me for m in mods)
    assert device.build_modules(requests) == mods and device.compile_count() == 2
    k = mods[1].function("k")  # the typed launch path on a loaded module
    assert [p.name for p in k.params] == ["x", "n"] and k.num_regs == 32


def test_failed_compile_is_raised_and_released(fake_backend) -> None:  # noqa: F811
    """A source that does not compile: its error is raised after the call's other modules were loaded, and
    the key is free again (a later call compiles it)."""
    broken = {"bad"}

    class CompileError(Exception):
        pass

    def failing(real: Any) -> Any:
        def compile_source(source: str, **kw: Any) -> bytes:
            if any(f"// {tag}\n" in source for tag in broken):
                raise CompileError("nvcc compilation failed")
            return real(source, **kw)

        return compile_source

    _compiler(failing)
    with pytest.raises(CompileError, match="nvcc"):
        device.build_modules([(_source("bad"), ("bad",)), (_source("good"), ("good",))])
    assert device.compile_count() == 1  # "good" was loaded
    broken.clear()
    mod = device.build_module(_source("bad"), ("bad",))
    assert mod.raw.src.startswith("// bad") and device.compile_count() == 2


def test_fake_solve_builds_only_the_modules_its_pairs_use(fake_backend, monkeypatch) -> None:  # noqa: F811
    """GPUBackend.solve builds a call's modules in one build_modules round once the pairs are routed: a call
    whose every pair goes to the compact solver compiles no per-block module (its register figure is the
    compact kernel's); a call with a pair too large for the compact bins builds the per-block module in the
    same round as the compact bins."""
    drv, backend = fake_backend
    drv.function_attribute = type("FA", (), {"MAX_DYNAMIC_SHARED_SIZE_BYTES": "max_dyn"})
    nk, ek = CASES["labeled"]
    current: dict = {}
    built: list[str] = []
    block_log: list = []

    def factory(src: str) -> Any:
        if compact.KERNEL in src:
            built.append("compact")
            return CompactModule(src, nk, ek, current["config"], [])
        built.append("solver")
        return BlockStub(src, block_log)

    sys.modules["pycuda.compiler"].factory = factory
    rounds: list[list[str]] = []
    real_build = device.build_modules

    def spy(requests: Any) -> list:
        rounds.append([key[0] for _, key in requests])
        return real_build(requests)

    monkeypatch.setattr(device, "build_modules", spy)
    graphs = [_molecule(n, 30 + s) for s, n in enumerate((7, 15, 30, 90))]
    be = backend.GPUBackend(rtol=1e-10)

    systems = [prepare_graph(g, i, nk, ek, q=0.05) for i, g in enumerate(graphs[:3])]
    current["config"] = be._config(systems, nk, ek)
    pairs = np.array([(i, j) for i in range(3) for j in range(i, 3)])
    vals, _, _, conv = be.solve(systems, systems, pairs, nk, ek)
    assert built and set(built) == {"compact"} and not block_log
    assert len(rounds) == 1 and set(rounds[0]) == {"compact"} and len(rounds[0]) >= 2  # all bins in one round
    assert device.compile_count() == len(built) == be.last_extra["compiles"]
    assert be.last_extra["regs"] == 96  # CompactModule's kernel
    assert conv.all()
    for t, (i, j) in enumerate(pairs):
        ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
        assert abs(vals[t] - ref) <= 1e-7 * abs(ref), (i, j)

    built.clear()
    rounds.clear()
    systems = [prepare_graph(g, i, nk, ek, q=0.05) for i, g in enumerate(graphs)]
    current["config"] = be._config(systems, nk, ek)
    pairs = np.array([(3, 3)])  # 8,100 product unknowns: over the largest compact bin
    be.solve(systems, systems, pairs, nk, ek)
    assert "solver" in built and block_log
    assert rounds[0] == ["solver"] and be.last_extra["regs"] == 64  # BlockStub's kernel

    built.clear()
    rounds.clear()
    pairs = np.array([(0, 1), (1, 2), (3, 3)])  # two compact pairs (their bins built already) and a large one
    be.solve(systems, systems, pairs, nk, ek)
    assert "compact" in rounds[0] and rounds[0][-1] == "solver"  # one round: the bins and the per-block module
    assert "compact" not in built  # the bins of the first call are reused


def test_label_fields_read_as_floats_when_one_graph_holds_floats():
    """A field held as integers by the first graph and as floats by another (or an edgeless graph's
    empty integer array beside floats) is generated and packed as float: the first graph's dtype
    alone made the device read float bits as integers (a 0.62 relative error on mixed sizes)."""
    import numpy as np

    from mgkflow import Graph
    from mgkflow.gpu.pack import label_dtypes, pack_for_kernels
    from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential
    from mgkflow.system import prepare_graph

    A = np.array([[0.0, 1.0], [1.0, 0.0]])
    nk, ek = KroneckerDelta(0.5, "c"), SquareExponential(1.0, "e")
    empty = np.zeros((1, 1), dtype=np.int64)
    first = Graph(np.zeros((1, 1)), node_labels={"c": np.array([1])}, edge_labels={"e": empty})
    second = Graph(A, node_labels={"c": np.array([0.5, 1.0])}, edge_labels={"e": A * 1.5})
    systems = [prepare_graph(g, i, nk, ek) for i, g in enumerate([first, second])]
    node, edge = label_dtypes(systems, nk.fields, ek.fields)
    assert node["c"].kind == "f" and edge["e"].kind == "f"
    hb = pack_for_kernels(systems, nk, ek)
    assert hb.batch.node_labels["c"].dtype == np.float32 and hb.batch.edge_labels["e"].dtype == np.float32
    ints = [prepare_graph(Graph(A, node_labels={"c": np.array([2, 3])}), i, nk, Constant(1.0)) for i in range(2)]
    assert label_dtypes(ints, nk.fields, ())[0]["c"].kind == "i"
