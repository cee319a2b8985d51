"""A thread other than the main one that made the GPU context current pops it again when it ends
(mgkflow/gpu/device.py: _push_here): PyCUDA aborts the process when a thread ends with a context on its
stack (a Dask worker's task threads at shutdown). A fake ``pycuda.driver`` with a per-thread stack."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from mgkflow.gpu import device


class _Ctx:
    def __init__(self, log: list) -> None:
        self.log = log

    def push(self) -> None:
        _Fake.stack().append(self)
        self.log.append(("push", threading.get_ident()))

    def pop(self) -> None:
        self.log.append(("pop", threading.get_ident()))
        stack = _Fake.stack()  # (at thread exit this fake's thread-local stack may be gone already;
        if stack:  # PyCUDA's is C++ thread-specific storage, dropped after Python's)
            stack.pop()


class _Fake:
    local = threading.local()
    log: list = []

    @classmethod
    def stack(cls) -> list:
        if not hasattr(cls.local, "stack"):
            cls.local.stack = []
        return cls.local.stack


@pytest.fixture
def fake_driver(monkeypatch):
    _Fake.log = []
    _Fake.local = threading.local()
    ctx = _Ctx(_Fake.log)
    drv = types.ModuleType("pycuda.driver")
    drv.init = lambda: None
    drv.Context = types.SimpleNamespace(get_current=lambda: _Fake.stack()[-1] if _Fake.stack() else None)
    drv.Device = lambda i: types.SimpleNamespace(retain_primary_context=lambda: ctx)
    pkg = types.ModuleType("pycuda")
    pkg.driver = drv
    monkeypatch.setitem(sys.modules, "pycuda", pkg)
    monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    device.reset()
    yield ctx
    device.reset()


def _in_thread(fn) -> int:
    out = {}

    def run() -> None:
        fn()
        out["ident"] = threading.get_ident()
        out["depth"] = len(_Fake.stack())

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert out["depth"] == 1  # current while the thread ran
    return out["ident"]


def test_worker_threads_pop_the_context_they_pushed(fake_driver):
    first = _in_thread(device.ensure_context)  # creates the context in a worker thread
    second = _in_thread(device.ensure_context)  # another thread makes the same context current
    assert device._state["context"] is fake_driver
    assert _Fake.log == [("push", first), ("pop", first), ("push", second), ("pop", second)]


def test_the_main_thread_keeps_its_context(fake_driver):
    device.ensure_context()
    device.ensure_context()  # current already: no second push
    assert _Fake.log == [("push", threading.get_ident())]
    assert _Fake.stack() == [fake_driver]
    _Fake.stack().clear()  # (the atexit pop would find nothing)


def test_module_cache_freed_at_exit_with_the_context_current(fake_driver, monkeypatch):
    """The atexit hook unloads the cached modules with the context made current, and pops it again:
    left to the interpreter's teardown, PyCUDA frees them without a context and warns (NOTES S25-B)."""
    drv = sys.modules["pycuda.driver"]
    monkeypatch.setattr(drv.Context, "pop", lambda: _Fake.stack().pop(), raising=False)
    current_at_free = []

    class _Module:
        def __del__(self) -> None:
            current_at_free.append(drv.Context.get_current())

    device._state["modules"] = {"k": _Module()}
    assert drv.Context.get_current() is None
    device._free_modules(fake_driver)
    assert current_at_free == [fake_driver]
    assert device._state["modules"] == {}
    assert _Fake.stack() == []
