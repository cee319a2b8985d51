"""Module builds of mgkflow.gpu.device on the fake PyCUDA of test_wide.py (no GPU needed): one compile per
key across threads, different keys compiled concurrently (a call's modules in a thread pool, loaded in the
calling thread), failed compiles released."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from test_wide import FakeAlloc, fake_backend  # noqa: F401  (fixture)

from mgkflow.gpu import device

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
