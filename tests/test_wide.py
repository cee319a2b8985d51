"""The wide GPU path (one pair with the whole device, ``mgkflow.gpu.solvers.wide``).

CPU tests: the generated source has no placeholders and compiles with nvcc; the kernel
signatures match the launcher; and the host code of :func:`solve_pair_wide` runs end to end
on a fake PyCUDA driver whose kernels are numpy emulations of ``mgk_wide.cu`` (argument
order, dtypes, grids, the partial-sum read-back and the tile-pair counter reset are all
checked) against the float64 CPU solver. GPU tests (marked ``gpu``) compare the real thing
with the CPU backend and with the per-pair GPU solver.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import types
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest

from mgkflow.backends.exact import solve_pair
from mgkflow.gpu import batch, device
from mgkflow.gpu.solvers import compact
from mgkflow.gpu.solvers.wide import STAGED_MIN_Q, WIDE_BLOCK, WIDE_KERNELS, wide_pcg, wide_source
from mgkflow.gpu.source import KPAR, KernelConfig, kernel_values, make_config
from mgkflow.graph import Graph
from mgkflow.kernels import BaseKernel, Constant, KroneckerDelta, SquareExponential
from mgkflow.system import GraphSystem, prepare_graph

NVCC = shutil.which("nvcc")

SOURCE_CONFIGS = {
    "unlabeled": (Constant(1.0), Constant(1.0), {}, {}, False),
    "const-edge-0.5": (Constant(1.0), Constant(0.5), {}, {}, False),
    "kd-node-se-edge": (KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length"), {"label": "int64"},
                        {"length": "float64"}, False),
    "kd-node-se-edge-wdouble": (KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length"),
                                {"label": "int64"}, {"length": "float64"}, True),
    "unlabeled-wdouble": (Constant(1.0), Constant(1.0), {}, {}, True),
    "products": (KroneckerDelta(0.5, "element") * SquareExponential(2.0, "charge"),
                 KroneckerDelta(0.8, "order") * SquareExponential(1.0, "distance"),
                 {"element": "int64", "charge": "float64"}, {"order": "int64", "distance": "float64"}, False),
}  # fmt: skip


def _source_config(name: str, row_ilp: int = 2) -> KernelConfig:
    nk, ek, nd, ed, wd = SOURCE_CONFIGS[name]
    return make_config(nk, ek, nd, ed, xmv="rows", weight_double=wd, row_ilp=row_ilp)


# ---------------------------------------------------------------------------- source
def test_sources_have_no_placeholders() -> None:
    for name in SOURCE_CONFIGS:
        src = wide_source(_source_config(name))
        assert "${" not in src, name
        for kernel in WIDE_KERNELS:
            assert f" {kernel}(" in src, (name, kernel)


def test_block_validated() -> None:
    cfg = _source_config("unlabeled")
    assert "#define BLOCK 128" in wide_source(cfg, 128)
    for bad in (0, 48, 2048):
        with pytest.raises(ValueError, match="multiple of 32"):
            wide_source(cfg, bad)
    assert "#define ROW_ILP 2" in wide_source(cfg) and "#define ROW_ILP 1" in wide_source(cfg, row_ilp=1)
    assert "#define ROW_ILP 1" in wide_source(_source_config("unlabeled", 1))
    with pytest.raises(ValueError, match="row_ilp"):
        wide_source(cfg, row_ilp=3)


@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
def test_nvcc_compiles_every_config(tmp_path: Path) -> None:
    jobs = []
    for name in SOURCE_CONFIGS:
        variants = ((WIDE_BLOCK, 2), (512, 2), (WIDE_BLOCK, 1)) if name == "kd-node-se-edge" else ((WIDE_BLOCK, 2),)
        for block, ilp in variants:
            path = tmp_path / f"{name}-{block}-ilp{ilp}.cu"
            path.write_text(wide_source(_source_config(name, ilp), block))
            jobs.append(path)

    def compile_one(path: Path) -> tuple[Path, subprocess.CompletedProcess]:
        out = path.with_suffix(".cubin")
        cmd = [NVCC, "-arch=sm_90", "-cubin", "-O3", "-std=c++17", "-o", str(out), str(path)]
        return path, subprocess.run(cmd, capture_output=True, text=True, timeout=180)

    with ThreadPoolExecutor(max_workers=4) as ex:
        for path, proc in ex.map(compile_one, jobs):
            assert proc.returncode == 0, f"{path.name}:\n{proc.stderr}"
            assert "warning" not in proc.stderr.lower(), f"{path.name}:\n{proc.stderr}"
            assert path.with_suffix(".cubin").stat().st_size > 0


_KERNEL_RE = re.compile(r'extern "C" __global__ void __launch_bounds__\(BLOCK(?:, \w+)?\) (\w+)\((.*?)\)\s*\{', re.S)


def _signatures(src: str) -> dict[str, list[tuple[str, str]]]:
    """{kernel: [(C type, name), ...]} of the extern "C" kernels of a source."""
    src = re.sub(r"//[^\n]*", "", src)
    out = {}
    for name, params in _KERNEL_RE.findall(src):
        plist = []
        for p in params.split(","):
            p = " ".join(p.replace("__restrict__", "").split())
            m = re.match(r"(.*?)\s*(\w+)$", p)
            assert m, p
            plist.append((m.group(1).strip(), m.group(2)))
        out[name] = plist
    return out


def _kind(ctype: str) -> str:
    if "*" in ctype:
        return "P"
    base = ctype.replace("const", "").strip()
    return {"int": "i", "long long": "q", "double": "d"}[base]


def test_device_parser_reads_the_wide_signatures() -> None:
    """mgkflow.gpu.device parses every wide kernel's parameters as this file's parser does
    (launches pass arguments by these names; the fake module checks them)."""
    for name in ("kd-node-se-edge", "kd-node-se-edge-wdouble"):
        src = wide_source(_source_config(name))
        sigs = device.parse_signatures(src)
        ours = _signatures(src)
        assert set(sigs) == set(WIDE_KERNELS) == set(ours)
        for kernel, params in sigs.items():
            assert [p.name for p in params] == [n for _, n in ours[kernel]], kernel
            assert "".join(p.kind for p in params) == "".join(_kind(t) for t, _ in ours[kernel]), kernel


def test_typed_launch_rejects_wrong_arguments() -> None:
    """Kernel arguments are checked against the declaration: names, pointer vs scalar, widths, dtypes."""
    src = 'typedef float w_t;\nextern "C" __global__ void k(const w_t* __restrict__ w, const int n, double* x) {}'
    got: list = []
    k = device.Kernel(lambda *a, **kw: got.append(a), "k", device.parse_signatures(src)["k"])
    buf = device.DeviceArray(alloc="W", dtype=np.dtype(np.float32), size=4)
    k(grid=(1, 1), block=(32, 1, 1), w=buf, n=3, x="X")
    assert got == [("W", np.int32(3), "X")] and type(got[0][1]) is np.int32
    bad = [
        {"w": buf, "n": 3},  # missing x
        {"w": buf, "n": 3, "x": "X", "y": 1},  # unknown y
        {"w": device.DeviceArray("W", np.dtype(np.float64), 4), "n": 3, "x": "X"},  # float64 for w_t = float
        {"w": buf, "n": 2**31, "x": "X"},  # int32 overflow
        {"w": buf, "n": 1.5, "x": "X"},  # float for int
        {"w": 7, "n": 3, "x": "X"},  # scalar for a pointer
        {"w": buf, "n": "X", "x": "X"},  # pointer for a scalar
    ]
    for kw in bad:
        with pytest.raises((TypeError, OverflowError)):
            k(grid=(1, 1), block=(32, 1, 1), **kw)


# ---------------------------------------------------------------------------- host loop
def test_wide_pcg_matches_dense_cg() -> None:
    """wide_pcg with numpy steps = textbook Jacobi PCG on a small SPD system."""
    rng = np.random.default_rng(1)
    n = 40
    M = rng.random((n, n)) * 0.1
    M = M + M.T
    D = M.sum(axis=1) + rng.uniform(0.5, 1.0, n)
    Mat = np.diag(D) - M
    b = rng.random(n)
    pv = rng.random(n)
    st: dict[str, np.ndarray] = {}

    def init():
        st.update(X=np.zeros(n), R=b.copy(), P=b / D)
        return float(b @ (b / D)), float(b @ b)

    def xmv():
        st["A"] = Mat @ st["P"]
        return float(st["P"] @ st["A"])

    def update(alpha):
        st["X"] += alpha * st["P"]
        st["R"] -= alpha * st["A"]
        return float(st["R"] @ (st["R"] / D)), float(st["R"] @ st["R"])

    def direction(beta):
        st["P"] = st["R"] / D + beta * st["P"]

    k, it, res, conv = wide_pcg(init, xmv, update, direction, lambda: float(pv @ st["X"]), 1e-12, 500)
    assert conv and 0 < it < 500 and res <= 1e-12
    assert abs(k - pv @ np.linalg.solve(Mat, b)) <= 1e-10 * abs(k)
    k2, it2, res2, conv2 = wide_pcg(init, xmv, update, direction, lambda: float(pv @ st["X"]), 1e-12, 2)
    assert it2 == 2 and not conv2 and res2 > 1e-12


# ---------------------------------------------------------------------------- fake driver
class FakeAlloc:
    """Device memory of the fake driver: raw bytes (fresh allocations hold NaN / -1 garbage). Each has an
    address of its own (``int()``), so that a pointer into it (``mgkflow.gpu.device.offset``) can be
    resolved (:meth:`at`)."""

    _SPAN = 1 << 36
    _live: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
    _next = [1]

    def __init__(self, nbytes: int, data: bytes | None = None) -> None:
        self.buf = np.full(max(int(nbytes), 1), 0xFF, dtype=np.uint8)
        if data is not None:
            self.buf[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        self.nbytes = int(nbytes)
        self.addr = FakeAlloc._next[0] * FakeAlloc._SPAN
        FakeAlloc._next[0] += 1
        FakeAlloc._live[self.addr] = self

    def __int__(self) -> int:
        return self.addr

    def view(self, dtype: Any, offset: int = 0) -> np.ndarray:
        n = (self.nbytes - offset) // np.dtype(dtype).itemsize
        return self.buf[offset : offset + n * np.dtype(dtype).itemsize].view(dtype)

    @staticmethod
    def at(ptr: Any, dtype: Any) -> np.ndarray:
        """The memory from address ``ptr`` to the end of its allocation, as ``dtype``."""
        ptr = int(ptr)
        base = ptr // FakeAlloc._SPAN * FakeAlloc._SPAN
        return FakeAlloc._live[base].view(dtype, ptr - base)


class _FakeEvent:
    def record(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def time_since(self, other: Any) -> float:
        return 1.0


class _Attrs:
    """``pycuda.driver.device_attribute`` stand-in: every attribute is its own name."""

    def __getattr__(self, name: str) -> str:
        return name


def _fake_driver(free_bytes: int = 8 << 30, alloc_limit: int | None = None) -> types.ModuleType:
    drv = types.ModuleType("pycuda.driver")
    alloc_limit = free_bytes if alloc_limit is None else alloc_limit

    class Error(Exception):
        pass

    class DriverMemoryError(Error):
        pass

    drv.Error = Error
    drv.MemoryError = DriverMemoryError
    drv.to_device = lambda arr: FakeAlloc(np.ascontiguousarray(arr).nbytes, np.ascontiguousarray(arr).tobytes())

    def mem_alloc(nbytes: int) -> FakeAlloc:
        if nbytes > alloc_limit:
            raise DriverMemoryError("cuMemAlloc failed: out of memory")
        return FakeAlloc(nbytes)

    def memcpy_dtoh(host: np.ndarray, dev: FakeAlloc) -> None:
        assert isinstance(dev, FakeAlloc) and host.flags.c_contiguous
        assert host.nbytes <= dev.nbytes, "read past the end of a device allocation"
        host.reshape(-1).view(np.uint8)[:] = dev.buf[: host.nbytes]

    def memset_d32(dev: FakeAlloc, value: int, count: int) -> None:
        assert 4 * count <= dev.nbytes
        dev.buf[: 4 * count].view(np.uint32)[:] = value

    def memcpy_htod(dev: FakeAlloc, host: np.ndarray) -> None:
        data = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        assert isinstance(dev, FakeAlloc) and data.size <= dev.nbytes
        dev.buf[: data.size] = data

    drv.mem_alloc = mem_alloc
    drv.memcpy_dtoh = memcpy_dtoh
    drv.memcpy_dtoh_async = lambda host, dev, stream=None: memcpy_dtoh(host, dev)  # kernels ran at launch
    drv.memcpy_htod_async = lambda dev, host, stream=None: memcpy_htod(dev, host)
    def pagelocked_empty(shape: Any, dtype: Any) -> np.ndarray:
        a = np.empty(shape, dtype=dtype)
        a.reshape(-1).view(np.uint8)[:] = 0xFF  # garbage: NaN / -1, as fresh device memory
        return a

    drv.pagelocked_empty = pagelocked_empty
    drv.memcpy_htod = memcpy_htod
    drv.memset_d32 = memset_d32
    drv.memset_d32_async = lambda dev, value, count, stream=None: memset_d32(dev, value, count)
    drv.mem_get_info = lambda: (free_bytes, 2 * free_bytes)
    drv.Event = _FakeEvent
    drv.device_attribute = _Attrs()
    attrs = {
        "MULTIPROCESSOR_COUNT": 3,
        "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
        "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536,
    }
    device = types.SimpleNamespace(
        get_attribute=lambda a: attrs.get(a, 100 * 1024), compute_capability=lambda: (9, 0), name=lambda: "fake"
    )
    drv.Context = types.SimpleNamespace(get_device=lambda: device, get_current=lambda: object())
    drv.init = lambda: None
    return drv


@pytest.fixture
def fake_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[types.ModuleType, types.ModuleType]]:
    """(fake pycuda.driver, a fresh import of mgkflow.gpu.backend bound to it); undone after the test.

    ``pycuda.compiler.compile`` is faked too (its "cubin" is the source's bytes), and
    ``pycuda.driver.module_from_buffer(cubin)`` returns ``sys.modules["pycuda.compiler"].factory(source)``.
    """
    import importlib

    import mgkflow.gpu

    drv = _fake_driver()
    compiler = types.ModuleType("pycuda.compiler")

    def compile_source(source: str, **kw: Any) -> bytes:
        assert kw.get("no_extern_c") is True and kw.get("arch") == "sm_90", kw
        assert kw.get("options") == ["-O3", "-std=c++17"], kw
        return source.encode()

    def module_from_buffer(cubin: bytes) -> Any:
        assert isinstance(cubin, bytes), type(cubin)
        return compiler.factory(cubin.decode())

    compiler.compile = compile_source
    drv.module_from_buffer = module_from_buffer
    pkg = types.ModuleType("pycuda")
    pkg.__path__ = []  # a package
    pkg.driver = drv
    pkg.compiler = compiler
    monkeypatch.setitem(sys.modules, "pycuda", pkg)
    monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    monkeypatch.setitem(sys.modules, "pycuda.compiler", compiler)
    monkeypatch.setattr(mgkflow.gpu, "backend", None, raising=False)
    device.reset()  # no context, module or device limits of an earlier (fake) driver
    name = "mgkflow.gpu.backend"
    real = sys.modules.pop(name, None)
    try:
        backend = importlib.import_module(name)
        assert backend.cuda is drv
        yield drv, backend
    finally:
        device.reset()
        sys.modules.pop(name, None)
        if real is not None:
            sys.modules[name] = real


def _decode_labels(words: np.ndarray, fields: tuple[tuple[str, str], ...], stride: int) -> dict[str, np.ndarray]:
    out = {}
    for k, (f, ct) in enumerate(fields):
        w = words[k * stride : (k + 1) * stride]
        out[f] = w.view(np.int32).astype(np.int64) if ct == "int" else w.view(np.float32).astype(np.float64)
    return out


def _blocks_of(index: np.ndarray, block: int, grid: int) -> np.ndarray:
    """Block that handles entry ``index`` in a grid-stride loop."""
    return (index // block) % grid


class FakeModule(device.Module):
    """Compiled-module stand-in: kernels of ``mgk_wide.cu`` emulated in numpy.

    Arguments are bound by the parameter names and C types parsed from the generated source
    (by this file's own parser), so a launch with arguments out of order, of the wrong dtype or
    count fails here. The ``mgk_kpar`` constant must hold the kernels' values at every launch.
    """

    def __init__(self, config: KernelConfig, node_kernel: BaseKernel, edge_kernel: BaseKernel,
                 block: int = WIDE_BLOCK) -> None:  # fmt: skip
        src = wide_source(config, block)
        super().__init__(self, src)
        self.config, self.nk, self.ek, self.block = config, node_kernel, edge_kernel, block
        self.sigs = _signatures(src)
        self.calls: list[str] = []
        self.kpar = FakeAlloc(4 * config.n_par)

    def get_global(self, name: str) -> tuple[FakeAlloc, int]:
        assert name == KPAR
        return self.kpar, self.kpar.nbytes

    def get_function(self, name: str) -> Any:
        mod = self

        class Func:
            num_regs = 40

            shared_size_bytes = 0

            def __call__(self, *args: Any, block: tuple, grid: tuple, shared: int = 0) -> None:
                mod.launch(name, args, block, grid)

            def set_attribute(self, attr: Any, value: int) -> None:
                assert value <= 227 * 1024, value

        return Func()

    def _bind(self, name: str, args: tuple) -> dict[str, Any]:
        params = self.sigs[name]
        assert len(args) == len(params), f"{name}: {len(args)} args for {len(params)} params"
        wdt = np.float64 if self.config.weight_double else np.float32
        kw = {}
        for (ctype, pname), v in zip(params, args):
            if "*" in ctype:
                assert isinstance(v, FakeAlloc), f"{name}.{pname}: expected a device pointer, got {type(v)}"
                base = ctype.replace("const", "").replace("*", "").strip()
                dt = {"int": np.int32, "unsigned int": np.uint32, "double": np.float64, "w_t": wdt,
                      "unsigned long long": np.uint64, "float": np.float32}[base]  # fmt: skip
                kw[pname] = v.view(dt)
            else:
                want = {"i": np.int32, "q": np.int64, "d": np.float64}[_kind(ctype)]
                assert type(v) is want, f"{name}.{pname}: expected {want.__name__}, got {type(v).__name__}"
                kw[pname] = v.item()
        return kw

    def launch(self, name: str, args: tuple, block: tuple, grid: tuple) -> None:
        assert tuple(block) == (self.block, 1, 1), block
        assert len(grid) == 2 and grid[1] == 1 and isinstance(grid[0], int) and grid[0] >= 1, grid
        self.calls.append(name)
        assert np.array_equal(self.kpar.view(np.float32), kernel_values(self.nk, self.ek)), "kernel values not set"
        kw = self._bind(name, args)
        getattr(self, "_" + name)(kw, grid[0])

    # ---- emulated kernels
    def _part(self, kw: dict, grid: int, blocks: np.ndarray, a: np.ndarray, b: np.ndarray | None = None) -> None:
        part = kw["part"]
        assert part.size >= 2 * grid
        part[0 : 2 * grid : 2] = np.bincount(blocks, weights=a, minlength=grid)[:grid]
        part[1 : 2 * grid : 2] = 0.0 if b is None else np.bincount(blocks, weights=b, minlength=grid)[:grid]
        part[2 * grid :] = np.nan  # stale slots of larger grids: the host must read exactly 2 * grid

    @staticmethod
    def _entries(kw: dict) -> tuple[np.ndarray, ...]:
        N, nt2 = kw["N"], kw["nt2"]
        idx = np.arange(N)
        tp, e = idx >> 6, idx & 63
        I, I2 = tp // nt2, tp % nt2
        i, i2 = I * 8 + (e >> 3), I2 * 8 + (e & 7)
        return idx, i, i2, (i < kw["n1"]) & (i2 < kw["n2"])

    def _wide_init(self, kw: dict, grid: int) -> None:
        idx, i, i2, real = self._entries(kw)
        N = kw["N"]
        u1, u2 = kw["node_off1"] + i[real], kw["node_off2"] + i2[real]
        labels = _decode_labels(kw["nlab"], self.config.node_fields, kw["nlab_stride"])
        kv = np.broadcast_to(
            self.nk({f: v[u1] for f, v in labels.items()}, {f: v[u2] for f, v in labels.items()}), u1.shape
        ).astype(np.float32)
        kv = np.maximum(kv, np.float32(1e-30)).astype(np.float64)
        d, q = kw["dvec"], kw["qvec"]
        dg = np.ones(N)
        b = np.zeros(N)
        dd = d[u1] * d[u2]
        dg[real] = dd / kv
        b[real] = dd * q[u1] * q[u2]
        di = 1.0 / dg
        kw["DG"][:N], kw["DI"][:N] = dg, di
        kw["X"][:N], kw["A"][:N] = 0.0, 0.0
        kw["R"][:N], kw["P"][:N] = b, b * di
        self._part(kw, grid, _blocks_of(idx, self.block, grid), b * b * di, b * b)

    def _wide_xmv(self, kw: dict, grid: int) -> None:
        nt2, n_tp = kw["nt2"], kw["n_tp"]
        nt1 = n_tp // nt2
        N = 64 * n_tp
        rp, coff, w = kw["rrowptr"], kw["rcoff"], kw["rweight"]
        c0 = int(kw["tp_counter"][0])
        assert c0 == 0, "tile-pair counter not reset before the XMV launch"
        kw["tp_counter"][0] = n_tp + grid * (self.block // 32)

        def nonzeros(off: int, nt: int) -> tuple[np.ndarray, np.ndarray]:
            ptr = rp[off : off + nt * 8 + 1].astype(np.int64)
            ks = np.arange(ptr[0], ptr[-1])
            rows = np.repeat(np.arange(nt * 8), np.diff(ptr))
            return ks, rows

        ka, ra = nonzeros(kw["rrow_off1"], nt1)
        kb, rb = nonzeros(kw["rrow_off2"], nt2)
        elab = _decode_labels(kw["relab"], self.config.edge_fields, kw["relab_stride"])
        ke = np.broadcast_to(
            self.ek({f: v[ka][:, None] for f, v in elab.items()}, {f: v[kb][None, :] for f, v in elab.items()}),
            (ka.size, kb.size),
        )
        w1, w2 = w[ka][:, None], w[kb][None, :]
        if self.config.weight_double:
            coef = w1 * w2 * ke
        else:  # COEF = (double)(w1 * w2 * ke) in float32
            coef = (w1 * w2 * ke.astype(np.float32)).astype(np.float32).astype(np.float64)
        ca, cb = coff[ka].astype(np.int64)[:, None], coff[kb].astype(np.int64)[None, :]
        src = (((ca >> 6) * nt2) << 6) + ((ca & 7) << 3) + cb
        dst = ((((ra >> 3) * nt2)[:, None] + (rb >> 3)[None, :]) << 6) + ((ra & 7) * 8)[:, None] + (rb & 7)[None, :]
        P, DG = kw["P"][:N], kw["DG"][:N]
        y = np.bincount(dst.ravel(), weights=(coef * P[src]).ravel(), minlength=N)
        a = DG * P - y
        kw["A"][:N] = a
        warp_of_tp = np.arange(N) >> 6
        blocks = (warp_of_tp % (grid * (self.block // 32))) // (self.block // 32)
        self._part(kw, grid, blocks, P * a)

    def _wide_xmv_staged(self, kw: dict, grid: int) -> None:
        from mgkflow.gpu.emulate import xmv_staged

        n_groups, n_tasks, nt2, T = kw["n_groups"], kw["n_tasks"], kw["nt2"], kw["slot_stride"]
        assert int(kw["task_counter"][0]) == 0, "task counter not reset before the XMV launch"
        kw["task_counter"][0] = n_tasks + grid
        groups = kw["groups"][: 8 * n_groups].reshape(-1, 8)
        nt1 = n_tasks // n_groups
        assert nt1 * n_groups == n_tasks and int(groups[:, 1].sum()) == 8 * nt2
        S = (kw["slot_col"].size - 1) // T
        fields = self.config.edge_fields
        lab2 = {}
        for k, (f, ct) in enumerate(fields):
            w = kw["slot_lab"][k * S * T : (k + 1) * S * T].reshape(S, T)
            lab2[f] = w.view(np.int32).astype(np.int64) if ct == "int" else w.view(np.float32).astype(np.float64)
        side1 = {k: kw[k] for k in ("rowptr", "tile_col", "bitmap", "toff", "weight")}
        side1["labels"] = _decode_labels(kw["elab"], fields, kw["elab_stride"])
        side2 = {"groups": groups, "colset": kw["colset"], "row_thread": kw["row_thread"], "labels": lab2,
                 "slot_col": kw["slot_col"][: S * T].reshape(S, T),
                 "slot_w": kw["slot_w"][: S * T].reshape(S, T)}  # fmt: skip
        N = 64 * nt1 * nt2
        P, DG = kw["P"][:N], kw["DG"][:N]
        y = xmv_staged(side1, kw["rowptr_off1"], nt1, side2, nt2, P, self.ek if fields else None)
        if not fields:
            y = y * float(np.asarray(self.ek({}, {})))
        a = DG * P - y
        kw["A"][:N] = a
        idx = np.arange(N)
        tp = idx >> 6
        row = (tp % nt2) * 8 + (idx & 7)  # G2 row of each entry
        group_of_row = np.repeat(np.arange(n_groups), groups[:, 1])
        self._part(kw, grid, ((tp // nt2) * n_groups + group_of_row[row]) % grid, P * a)

    def _wide_update(self, kw: dict, grid: int) -> None:
        N, al = kw["N"], kw["alpha"]
        X, R, P, A, DI = (kw[k][:N] for k in ("X", "R", "P", "A", "DI"))
        assert np.isfinite(A).all() and np.isfinite(P).all()
        X += al * P
        R -= al * A
        self._part(kw, grid, _blocks_of(np.arange(N), self.block, grid), R * (R * DI), R * R)

    def _wide_direction(self, kw: dict, grid: int) -> None:
        N = kw["N"]
        kw["P"][:N] = kw["R"][:N] * kw["DI"][:N] + kw["beta"] * kw["P"][:N]

    def _wide_dot(self, kw: dict, grid: int) -> None:
        idx, i, i2, real = self._entries(kw)
        pv = kw["pvec"]
        contrib = np.zeros(kw["N"])
        contrib[real] = pv[kw["node_off1"] + i[real]] * pv[kw["node_off2"] + i2[real]] * kw["X"][: kw["N"]][real]
        self._part(kw, grid, _blocks_of(idx, self.block, grid), contrib)


def _graph(n: int, p: float, seed: int, weights: str = "float32") -> Graph:
    rng = np.random.default_rng(seed)
    G = nx.gnp_random_graph(n, p, seed=seed)
    for e in G.edges:
        G.edges[e]["length"] = float(rng.uniform(1, 2))
        w = rng.uniform(0.5, 2.0)
        G.edges[e]["weight"] = float(w) if weights == "float64" else float(np.float32(w))
    for v in G.nodes:
        G.nodes[v]["label"] = int(rng.integers(0, 3))
    return Graph.from_networkx(G, node_labels=["label"], edge_labels=["length"])


def _weight_double(systems: list[GraphSystem]) -> bool:
    """Whether GPUBackend.solve stores the weights of ``systems`` in float64 (its test, verbatim)."""
    return any(not np.array_equal(s.graph.adjacency.data.astype(np.float32), s.graph.adjacency.data) for s in systems)


def _config(systems: list[GraphSystem], nk: BaseKernel, ek: BaseKernel, **kw: Any) -> KernelConfig:
    """The KernelConfig GPUBackend.solve builds for ``systems`` (``kw``: its other settings)."""
    first = systems[0].graph
    return make_config(
        nk,
        ek,
        {f: np.asarray(first.node_labels[f]).dtype for f in nk.fields},
        {f: np.asarray(first.edge_labels[f]).dtype for f in ek.fields},
        weight_double=_weight_double(systems),
        **kw,
    )


def _fake_db(backend: types.ModuleType, systems: list[GraphSystem], config: KernelConfig) -> Any:
    return batch.BatchCache().device_batch(systems, config, batch.tile_sort(config, True, False))


FAKE_CASES = {
    "labeled-f32": (KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length"), "float32", (21, 30, 13)),
    "labeled-f64": (KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length"), "float64", (30, 17, 45)),
    "unlabeled": (Constant(1.0), Constant(1.0), "float32", (8, 33, 9)),
    "const-edge": (KroneckerDelta(0.3, "label"), Constant(0.5), "float64", (40, 1, 16)),
}


@pytest.mark.parametrize("case", list(FAKE_CASES))
@pytest.mark.parametrize("q", [0.05, 0.0005])
@pytest.mark.parametrize("xmv", ["rows", "auto"])
def test_fake_device_matches_cpu(fake_backend, case: str, q: float, xmv: str) -> None:
    from mgkflow.gpu.solvers import wide

    drv, backend = fake_backend
    nk, ek, wt, sizes = FAKE_CASES[case]
    graphs = [_graph(n, min(1.0, 4.0 / max(n, 1)), 10 + k, wt) for k, n in enumerate(sizes)]
    systems = [prepare_graph(g, k, nk, ek, q=q) for k, g in enumerate(graphs)]
    config = _config(systems, nk, ek, xmv="rows")
    assert config.weight_double == (wt == "float64")
    db = _fake_db(backend, systems, config)
    for g1, g2 in ((0, 1), (1, 2), (2, 2), (2, 0)):
        mod = FakeModule(config, nk, ek)
        stats: dict = {}
        k, it, res, conv = wide._solve(drv, mod, db, g1, g2, 1e-12, 10_000, WIDE_BLOCK, None, stats, config, xmv,
                                       values=kernel_values(nk, ek))
        ref = solve_pair(systems[g1], systems[g2], nk, ek, rtol=1e-13)
        assert conv and res <= 1e-12, (case, g1, g2, it, res)
        # "auto" takes the staged XMV (float32 products) for labeled kernels at q >= 0.01
        assert stats["xmv"] == ("staged" if xmv == "auto" and q >= STAGED_MIN_Q and ek.fields else "rows")
        assert ("wide_xmv_staged" in mod.calls) == (stats["xmv"] == "staged")
        # labels and node kernel values are float32; with float32 weights COEF rounds to float32 too,
        # which costs ~eps32 / (2q) at small q (as in the per-pair solver: tests/test_gpu.py _tol)
        tol = 1e-7 if config.weight_double else (1e-6 if q >= 0.01 else 3e-5)
        assert abs(k - ref.value) <= tol * abs(ref.value), (case, g1, g2, k, ref.value)
        # launches: one init and one dot; per iteration one XMV and one update; a direction between
        la = stats["launches"]
        assert la["init"] == 1 and la["dot"] == 1
        assert la["xmv"] == la["update"] == it and la["direction"] == max(it - 1, 0)
        assert mod.calls[0] == "wide_init" and mod.calls[-1] == "wide_dot"
        assert stats["unknowns"] == 64 * int(db.nt[g1]) * int(db.nt[g2])


def test_fake_staged_selection(fake_backend) -> None:
    """"auto" takes the staged XMV for labeled kernels at q >= STAGED_MIN_Q (any weight storage);
    "staged" is forced at small q too; where the tables cannot be built "auto" falls back and
    "staged" says why."""
    from mgkflow.gpu.solvers import wide

    drv, backend = fake_backend
    nk, ek, wt, sizes = FAKE_CASES["labeled-f64"]
    for q, auto in ((0.05, "staged"), (0.0005, "rows")):
        systems = [prepare_graph(_graph(n, 0.3, n, wt), k, nk, ek, q=q) for k, n in enumerate(sizes)]
        config = _config(systems, nk, ek)
        assert config.weight_double
        db = _fake_db(backend, systems, config)
        ref = solve_pair(systems[0], systems[1], nk, ek, rtol=1e-12).value
        for xmv, want in (("auto", auto), ("staged", "staged")):
            stats: dict = {}
            k, *_ = wide._solve(drv, FakeModule(config, nk, ek), db, 0, 1, 1e-10, 500, WIDE_BLOCK, None, stats,
                                config, xmv, values=kernel_values(nk, ek))  # fmt: skip
            assert stats["xmv"] == want and abs(k - ref) <= 3e-5 * abs(ref)
    nk, ek, wt, _ = FAKE_CASES["labeled-f32"]
    systems = [prepare_graph(_graph(n, 1.0, n, wt), k, nk, ek) for k, n in enumerate((12, 40))]
    config = _config(systems, nk, ek)
    db = _fake_db(backend, systems, config)
    stats: dict = {}
    wide._solve(drv, FakeModule(config, nk, ek, 32), db, 0, 1, 1e-9, 100, 32, None, stats, config, "auto", 1,
                values=kernel_values(nk, ek))
    assert stats["xmv"] == "rows"
    with pytest.raises(ValueError, match="more than a block"):
        wide._solve(drv, FakeModule(config, nk, ek, 32), db, 0, 1, 1e-9, 10, 32, None, None, config, "staged", 1,
                    values=kernel_values(nk, ek))


def test_fake_workspace_reused_between_solves(fake_backend) -> None:
    """With a workspace dict the device vectors of one solve serve the next (no allocation) while
    large enough; a larger pair replaces them; results are those of fresh allocations."""
    from mgkflow.gpu.solvers import wide

    drv, backend = fake_backend
    nk, ek, wt, sizes = FAKE_CASES["labeled-f32"]
    systems = [prepare_graph(_graph(n, 0.3, n, wt), k, nk, ek) for k, n in enumerate(sizes)]
    config = _config(systems, nk, ek)
    db = _fake_db(backend, systems, config)
    allocs: list[int] = []
    real_alloc = drv.mem_alloc
    drv.mem_alloc = lambda nbytes: allocs.append(nbytes) or real_alloc(nbytes)
    ws: dict = {}
    pairs = ((2, 0), (2, 2), (1, 1))  # 13x21 nodes, then 13x13 (smaller), then 30x30 (larger)
    fresh = [wide._solve(drv, FakeModule(config, nk, ek), db, g1, g2, 1e-10, 500, WIDE_BLOCK, None, None, config,
                         "auto", values=kernel_values(nk, ek))[0] for g1, g2 in pairs]  # fmt: skip
    counts = []
    for (g1, g2), ref in zip(pairs, fresh):
        allocs.clear()
        k = wide._solve(drv, FakeModule(config, nk, ek), db, g1, g2, 1e-10, 500, WIDE_BLOCK, None, None, config,
                        "auto", workspace=ws, values=kernel_values(nk, ek))[0]  # fmt: skip
        counts.append(len(allocs))
        assert k == ref
    assert counts[0] == 8 and counts[1] == 0 and counts[2] == 8  # 6 vectors, partials, counter
    assert ws["vec_bytes"] == 8 * 64 * int(db.nt[1]) ** 2


def test_fake_device_iteration_limit_and_memory(fake_backend) -> None:
    from mgkflow.gpu.solvers import wide

    drv, backend = fake_backend
    nk, ek = KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length")
    systems = [prepare_graph(_graph(n, 0.2, n), k, nk, ek, q=0.0005) for k, n in enumerate((25, 34))]
    config = _config(systems, nk, ek)
    db = _fake_db(backend, systems, config)
    k, it, res, conv = wide._solve(drv, FakeModule(config, nk, ek), db, 0, 1, 1e-9, 3, WIDE_BLOCK, None, None,
                                   values=kernel_values(nk, ek))
    assert it == 3 and not conv and res > 1e-9 and np.isfinite(k)
    # block size other than the default, and an explicit blocks_per_sm
    k2, _, _, conv2 = wide._solve(drv, FakeModule(config, nk, ek, 64), db, 0, 1, 1e-9, 10_000, 64, 1, None,
                                  values=kernel_values(nk, ek))
    ref = solve_pair(systems[0], systems[1], nk, ek, rtol=1e-12)
    assert conv2 and abs(k2 - ref.value) <= 1e-6 * abs(ref.value)
    with pytest.raises(IndexError):
        wide._solve(drv, FakeModule(config, nk, ek), db, 0, 2, 1e-9, 10, WIDE_BLOCK, None, None,
                    values=kernel_values(nk, ek))
    small = _fake_driver(free_bytes=1000)
    with pytest.raises(MemoryError, match="product unknowns"):
        wide._solve(small, FakeModule(config, nk, ek), db, 0, 1, 1e-9, 10, WIDE_BLOCK, None, None,
                    values=kernel_values(nk, ek))
    failing = _fake_driver(alloc_limit=1000)  # free memory reported, allocation fails
    with pytest.raises(MemoryError, match="allocation failed"):
        wide._solve(failing, FakeModule(config, nk, ek), db, 0, 1, 1e-9, 10, WIDE_BLOCK, None, None,
                    values=kernel_values(nk, ek))


def test_fake_public_entry_point(fake_backend) -> None:
    """solve_pair_wide itself (compile_wide, the module cache, the context) and the GPU tests' helpers,
    on the fake driver and a fake compiler that checks it receives wide_source(config, block)."""
    from mgkflow.gpu.solvers.wide import solve_pair_wide

    drv, backend = fake_backend
    graphs = [_rgg(60, 1), _rgg(45, 2)]
    nk, ek = KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length")
    be, db, systems, config = _gpu_batch(graphs, nk, ek, 0.05)
    assert config.weight_double and config.xmv == be.xmv
    built: list[int] = []

    def factory(src: str) -> FakeModule:
        block = int(re.search(r"#define BLOCK (\d+)", src).group(1))
        assert src == wide_source(config, block)
        built.append(block)
        return FakeModule(config, nk, ek, block)

    sys.modules["pycuda.compiler"].factory = factory
    ref = solve_pair(systems[0], systems[1], nk, ek, rtol=1e-12)
    for block in (WIDE_BLOCK, 128, WIDE_BLOCK):
        stats: dict = {}
        k, it, res, conv = solve_pair_wide(db, 0, 1, config, kernel_values(nk, ek), rtol=1e-10, block=block,
                                           stats=stats)  # fmt: skip
        assert conv and res <= 1e-10 and abs(k - ref.value) <= 1e-7 * abs(ref.value)
        assert stats["block"] == block and stats["iterations"] == it
    assert built == [WIDE_BLOCK, 128] and device.compile_count() == 2  # the third call hits the cache


def test_fake_device_closed_form(fake_backend) -> None:
    """Unlabeled cycles: K = n m q^2 / (1 - (1 - q)^2), reached in one iteration."""
    from mgkflow.gpu.solvers import wide

    drv, backend = fake_backend
    q, sizes = 0.0005, (5, 12, 33)
    nk = ek = Constant(1.0)
    systems = [prepare_graph(Graph.from_networkx(nx.cycle_graph(n)), k, nk, ek, q=q) for k, n in enumerate(sizes)]
    config = _config(systems, nk, ek, xmv="rows")
    db = _fake_db(backend, systems, config)
    for g1, g2 in ((0, 2), (2, 2), (1, 0)):
        k, it, res, conv = wide._solve(drv, FakeModule(config, nk, ek), db, g1, g2, 1e-7, 100, WIDE_BLOCK, None, None,
                                       values=kernel_values(nk, ek))
        ref = sizes[g1] * sizes[g2] * q * q / (1 - (1 - q) ** 2)
        assert conv and it == 1 and abs(k - ref) <= 1e-12 * ref, (g1, g2, k, ref)


# ---------------------------------------------------------------------------- GPU
def _rgg(n: int, seed: int, degree: float = 8.0) -> Graph:
    rng = np.random.default_rng(seed)
    G = nx.random_geometric_graph(n, float(np.sqrt(degree / (n * np.pi))), seed=seed)
    pos = nx.get_node_attributes(G, "pos")
    for u, v in G.edges:
        G.edges[u, v]["length"] = 10.0 * float(np.hypot(*(np.subtract(pos[u], pos[v]))))
        G.edges[u, v]["weight"] = float(rng.uniform(0.5, 2.0))
    for v in G.nodes:
        G.nodes[v]["label"] = int(rng.integers(0, 3))
    return Graph.from_networkx(G, node_labels=["label"], edge_labels=["length"])


def _gpu_batch(graphs: list[Graph], nk: BaseKernel, ek: BaseKernel, q: float) -> tuple[Any, Any, list, KernelConfig]:
    from mgkflow.gpu import GPUBackend

    be = GPUBackend()
    systems = [prepare_graph(g, k, nk, ek, q=q) for k, g in enumerate(graphs)]
    extra = {"row_ilp": be.row_ilp}
    config = _config(
        systems, nk, ek, block=be.block, a_double=be.a_double, min_blocks=be.min_blocks, xmv=be.xmv,
        adaptive=not (isinstance(be.primitives, str) and be.primitives == "ss"), **extra,
    )  # fmt: skip
    return be, be._device_batch(systems, config), systems, config


def _check_pairs(graphs, nk, ek, q, pairs, tol, rtol=1e-7, variants=((WIDE_BLOCK, None),)) -> None:
    import dataclasses

    from mgkflow.gpu.solvers.wide import solve_pair_wide

    be, db, systems, config = _gpu_batch(graphs, nk, ek, q)
    per_pair = be.solve(systems, systems, pairs, nk, ek)
    xmvs = ("rows", "staged") if ek.fields else ("rows",)  # staged: labeled kernels (any q when forced)
    for (t, (g1, g2)), (block, ilp) in zip(enumerate(pairs), variants * len(pairs)):
        ref = solve_pair(systems[g1], systems[g2], nk, ek, rtol=1e-12)
        for xmv in xmvs:
            stats: dict = {}
            cfg = config if ilp is None else dataclasses.replace(config, row_ilp=ilp)
            k, it, res, conv = solve_pair_wide(db, g1, g2, cfg, kernel_values(nk, ek), rtol=rtol, block=block,
                                               stats=stats, xmv=xmv)  # fmt: skip
            err = abs(k - ref.value) / abs(ref.value)
            err_pp = abs(k - per_pair[0][t]) / abs(per_pair[0][t])
            print(f"\nWIDE pair {g1},{g2} ({systems[g1].n}x{systems[g2].n}) q={q} block={block} ilp={cfg.row_ilp} "
                  f"xmv={stats['xmv']}: K={k:.10g} it={it} "
                  f"(per-pair {per_pair[1][t]}) res={res:.2e} err_cpu={err:.2e} err_per_pair={err_pp:.2e} "
                  f"device_s={stats['device_s']:.4f} grid_xmv={stats['grid_xmv']} "
                  f"regs={stats['regs_xmv']}")  # fmt: skip
            assert stats["xmv"] == xmv
            assert conv and res <= rtol
            assert err <= tol
            assert err_pp <= 2 * tol


@pytest.mark.gpu
@pytest.mark.parametrize("q", [0.05, 0.0005])
def test_gpu_random_geometric(q: float) -> None:
    graphs = [_rgg(300, 1), _rgg(260, 2), _rgg(37, 3)]
    nk, ek = KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length")
    variants = ((WIDE_BLOCK, None), (512, 1), (128, 2))  # block, row_ilp (None: the batch config's)
    _check_pairs(graphs, nk, ek, q, [(0, 1), (1, 1), (2, 0)], 1e-5 if q >= 0.01 else 3e-5, variants=variants)


@pytest.mark.gpu
def test_gpu_proteins() -> None:
    from mgkflow import datasets

    graphs = datasets.proteins(n_graphs=3, cutoff=3.0)  # 947 x 874 atoms: 828k unknowns, 29M edge pairs
    nk, ek = datasets.default_kernels("proteins")
    _check_pairs(graphs, nk, ek, 0.05, [(0, 2)], 1e-5)


@pytest.mark.gpu
def test_gpu_closed_form_unlabeled() -> None:
    from mgkflow.gpu.solvers.wide import solve_pair_wide

    q = 0.0005
    sizes = (5, 12, 33, 200)
    graphs = [Graph.from_networkx(nx.cycle_graph(n)) for n in sizes]
    be, db, systems, config = _gpu_batch(graphs, Constant(1.0), Constant(1.0), q)
    for g1, g2 in ((0, 3), (3, 3), (2, 1)):
        k, it, res, conv = solve_pair_wide(db, g1, g2, config, kernel_values(Constant(1.0), Constant(1.0)))
        ref = sizes[g1] * sizes[g2] * q * q / (1 - (1 - q) ** 2)
        assert conv and abs(k - ref) <= 1e-9 * ref, (g1, g2, k, ref)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MGKFLOW_WIDE_BENCH"), reason="set MGKFLOW_WIDE_BENCH=1 (~1 min)")
def test_gpu_proteins_full_bench() -> None:
    """Two full heavy-atom proteins (~1e9 edge-pair products per XMV): wide vs per-pair GPU."""
    import time

    from mgkflow import datasets
    from mgkflow.gpu.solvers.wide import solve_pair_wide

    graphs = datasets.proteins(n_graphs=3)
    nk, ek = datasets.default_kernels("proteins")
    be, db, systems, config = _gpu_batch(graphs, nk, ek, 0.05)
    stats: dict = {}
    solve_pair_wide(db, 0, 2, config, kernel_values(nk, ek), max_iter=1)  # compile + warm up
    t0 = time.perf_counter()
    k, it, res, conv = solve_pair_wide(db, 0, 2, config, kernel_values(nk, ek), stats=stats)
    t_wide = time.perf_counter() - t0
    try:  # compile the per-pair solver outside the timing (same config as be.solve builds)
        from mgkflow.gpu.backend import compile_module

        compile_module(config)
    except Exception:  # noqa: BLE001 - timing only
        pass
    t0 = time.perf_counter()
    vals, its, _, convs = be.solve(systems, systems, [(0, 2)], nk, ek)
    t_pp = time.perf_counter() - t0
    dev_pp = be.last_extra.get("device_s", float("nan"))
    print(f"\nWIDEBENCH {systems[0].n}x{systems[2].n} nnz {graphs[0].nnz}x{graphs[2].nnz}: wide {t_wide:.3f}s "
          f"({it} it, device {stats['device_s']:.3f}s, grid_xmv {stats['grid_xmv']}, regs {stats['regs_xmv']}) "
          f"vs per-pair {t_pp:.3f}s (device {dev_pp:.3f}s, {its[0]} it); speedup {t_pp / t_wide:.1f}x; "
          f"rel diff {abs(k - vals[0]) / abs(vals[0]):.2e}")  # fmt: skip
    assert conv and convs[0]
    assert abs(k - vals[0]) <= 1e-6 * abs(vals[0])


class _SolverStub:
    """The per-pair module where only the wide path runs: attributes read by the planner, never launched."""

    def __init__(self, launched: list) -> None:
        self.launched = launched

    def get_function(self, name: str) -> Any:
        assert name == "mgk_solve"
        return types.SimpleNamespace(
            num_regs=64, shared_size_bytes=272, set_attribute=lambda *a: None,
            __call__=lambda *a, **k: self.launched.append(name),
        )  # fmt: skip

    def get_global(self, name: str) -> Any:
        raise AssertionError("the per-pair module gets no values when it is not launched")


@pytest.mark.parametrize("wide", [True, "auto"])
def test_fake_backend_routes_pairs_to_the_wide_path(fake_backend, wide, monkeypatch) -> None:
    """GPUBackend.solve end to end on the fake driver: the launch plan sends every pair to the
    wide path (forced, or because a 1 KiB scratch budget cannot hold one block's vectors; the compact
    solver, which needs no scratch, is switched off for that), the per-pair kernel is compiled but
    never launched, and K matches the CPU backend."""
    monkeypatch.setattr(compact, "BINS", ())
    drv, backend = fake_backend
    graphs = [_rgg(40, 3), _rgg(28, 4), _rgg(17, 5)]
    nk, ek = KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length")
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    launched: list[str] = []

    def factory(src: str) -> Any:
        if "wide_xmv" in src:
            block = int(re.search(r"#define BLOCK (\d+)", src).group(1))
            cfg = next(iter(be._wide_config))  # set below
            return FakeModule(cfg, nk, ek, block)
        return _SolverStub(launched)

    sys.modules["pycuda.compiler"].factory = factory
    kw = {"max_scratch_bytes": 1024} if wide == "auto" else {}
    be = backend.GPUBackend(wide=wide, rtol=1e-10, **kw)
    # the config the backend builds (weight_double: random weights), for the fake wide module
    be._wide_config = {_config(systems, nk, ek, block=be.block, a_double=be.a_double, min_blocks=be.min_blocks,
                               xmv=be.xmv, row_ilp=be.row_ilp, adaptive=True): None}  # fmt: skip
    pairs = np.array([(i, j) for i in range(3) for j in range(i, 3)])
    vals, its, res, conv = be.solve(systems, systems, pairs, nk, ek)
    assert conv.all() and not launched
    assert len(be.last_extra["wide"]) == len(pairs) and be.last_extra["launches"] == []
    for t, (i, j) in enumerate(pairs):
        ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
        assert abs(vals[t] - ref) <= 1e-7 * abs(ref), (i, j)


def test_fake_backend_per_pair_launch_arguments_match_the_kernel(fake_backend, monkeypatch) -> None:
    """The per-pair solver launches (tiny 128-thread class and a shared-memory class) pass
    exactly the arguments `mgk_solve` declares: count, pointer/scalar kinds and scalar widths,
    checked against the generated source (a GPU would reject or misread a mismatch). The compact
    solver is off here (its launches are checked in test_gpu_compact.py)."""
    drv, backend = fake_backend
    monkeypatch.setattr(compact, "BINS", ())
    drv.function_attribute = types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES="max_dynamic_shared")
    graphs = [_rgg(20, 7), _rgg(24, 8), _rgg(70, 9)]
    nk, ek = KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length")
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    launches: list[dict] = []
    sig_re = re.compile(
        r'extern "C" __global__ void __launch_bounds__\(BLOCK, MIN_BLOCKS\) mgk_solve\((.*?)\)\s*\{', re.S
    )

    class SolverModule:
        def __init__(self, src: str) -> None:
            params = re.sub(r"//[^\n]*", "", sig_re.search(src).group(1))
            # the parameter groups of mgk_common.cuh (object-like macros with continuation lines)
            for name, body in re.findall(r"#define (MGK_\w+_PARAMS)\s+((?:.*\\\n)*.*)", src):
                params = params.replace(name, re.sub(r"/\*.*?\*/|\\\n", " ", body))
            self.params = [" ".join(p.replace("__restrict__", "").split()) for p in params.split(",")]
            self.block = int(re.search(r"#define BLOCK (\d+)", src).group(1))
            self.p_smem = re.search(r"#define P_SMEM (\d)", src).group(1) == "1"
            self.kpar = FakeAlloc(4 * int(re.search(r"__constant__ float mgk_kpar\[(\d+)\]", src).group(1)))

        def get_global(self, name: str) -> tuple[FakeAlloc, int]:
            assert name == KPAR
            return self.kpar, self.kpar.nbytes

        def get_function(self, name: str) -> Any:
            assert name == "mgk_solve"
            mod = self

            class Func:
                num_regs = 64
                shared_size_bytes = 272

                def set_attribute(self, *a: Any) -> None:
                    pass

                def __call__(self, *args: Any, block: tuple, grid: tuple, shared: int = 0) -> None:
                    assert len(args) == len(mod.params), (len(args), len(mod.params))
                    for p, v in zip(mod.params, args):
                        if "*" in p:
                            assert isinstance(v, FakeAlloc), p
                        else:
                            want = {"int": np.int32, "long long": np.int64, "double": np.float64}[
                                p.replace("const ", "").rsplit(" ", 1)[0]
                            ]
                            assert type(v) is want, (p, type(v))
                    assert block == (mod.block, 1, 1) and grid[0] >= 1
                    assert np.array_equal(mod.kpar.view(np.float32), kernel_values(nk, ek))
                    launches.append({"block": mod.block, "p_smem": mod.p_smem, "shared": shared})

            return Func()

    sys.modules["pycuda.compiler"].factory = SolverModule
    be = backend.GPUBackend(wide=False)
    pairs = np.array([(i, j) for i in range(3) for j in range(i, 3)])
    be.solve(systems, systems, pairs, nk, ek)
    blocks = sorted({(c["block"], c["p_smem"]) for c in launches})
    assert blocks == [(128, True), (512, True)], launches  # tiny pairs in 128-thread blocks, others in 512
    assert all(c["shared"] > 0 for c in launches)


def test_fake_hyperparameter_sweep_compiles_once(fake_backend, monkeypatch) -> None:
    """20 evaluations with other values (10 edge length scales, 10 stop probabilities) through
    GPUBackend.solve: one wide module (and the per-pair module, not launched) is compiled, never more; every
    evaluation's K matches the CPU backend (the values reach the emulated kernels through
    ``mgk_kpar``, which the fake module checks at each launch; q through the re-uploaded node
    vectors, the graphs being packed once)."""
    drv, backend = fake_backend
    graphs = [_rgg(30, 3), _rgg(22, 4)]
    nk = KroneckerDelta(0.5, "label")
    sources: list[str] = []
    current: dict = {}

    def factory(src: str) -> Any:
        sources.append(src)
        if "wide_xmv" in src:
            block = int(re.search(r"#define BLOCK (\d+)", src).group(1))
            return FakeModule(current["config"], nk, current["ek"], block)
        return _SolverStub([])

    sys.modules["pycuda.compiler"].factory = factory
    packs: list[int] = []
    real_pack = backend.pack_host
    for where in (backend, batch):  # GPUBackend.host_batch, BatchCache.device_batch
        monkeypatch.setattr(where, "pack_host", lambda *a, **kw: packs.append(1) or real_pack(*a, **kw))
    be = backend.GPUBackend(wide=True, rtol=1e-10, wide_xmv="rows")
    sweep = [(ls, 0.05) for ls in np.geomspace(0.3, 3.0, 10)] + [(1.0, q) for q in np.geomspace(0.002, 0.5, 10)]
    pairs = np.array([(0, 0), (0, 1), (1, 1)])
    for ls, q in sweep:
        ek = SquareExponential(float(ls), "length")
        systems = [prepare_graph(g, k, nk, ek, q=float(q)) for k, g in enumerate(graphs)]
        current["config"] = _config(systems, nk, ek, xmv=be.xmv, row_ilp=be.row_ilp, adaptive=True)
        current["ek"] = ek
        # FakeModule checks mgk_kpar against its own kernels: refresh them on the cached module
        for mod in device._state["modules"].values():
            if isinstance(mod.raw, FakeModule):
                mod.raw.ek = ek
        vals, _, _, conv = be.solve(systems, systems, pairs, nk, ek)
        assert conv.all()
        for t, (i, j) in enumerate(pairs):
            ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
            assert abs(vals[t] - ref) <= 1e-7 * abs(ref), (ls, q, i, j)
    assert len([s for s in sources if "wide_xmv" in s]) == 1
    assert len(sources) == device.compile_count() == be.last_extra["compiles"] == 2
    assert len(packs) == 1  # same graphs: another q only re-uploads the node vectors


def test_fake_auto_follows_the_cost_models(fake_backend) -> None:
    """"auto" takes the strategy the cost models predict cheaper (labeled, q = 0.05, where the
    uncalibrated rule takes "staged"); a strategy that does not apply is never chosen; K is
    right either way."""
    from mgkflow.gpu.solvers import wide
    from mgkflow.gpu.strategies.cost import CostModel

    drv, backend = fake_backend
    nk, ek, wt, sizes = FAKE_CASES["labeled-f32"]
    systems = [prepare_graph(_graph(n, 0.3, n, wt), k, nk, ek, q=0.05) for k, n in enumerate(sizes)]
    config = _config(systems, nk, ek)
    db = _fake_db(backend, systems, config)
    ref = solve_pair(systems[0], systems[1], nk, ek, rtol=1e-12).value

    def models(rows_cost: float, staged_cost: float) -> dict:
        return {
            "wide_rows": CostModel("wide_rows", ("products",), (rows_cost,), 0.0),
            "staged": CostModel("staged", ("entries_x_groups",), (staged_cost,), 0.0),
        }

    for cm, want in ((None, "staged"), (models(1e-9, 1.0), "rows"), (models(1.0, 1e-9), "staged")):
        stats: dict = {}
        k, *_ = wide._solve(drv, FakeModule(config, nk, ek), db, 0, 1, 1e-10, 500, WIDE_BLOCK, None, stats, config,
                            "auto", values=kernel_values(nk, ek), cost_models=cm or {})  # fmt: skip
        assert stats["xmv"] == want and abs(k - ref) <= 1e-6 * abs(ref), (cm, stats["xmv"])
        assert set(stats["predicted_s"]) == (set() if cm is None else {"wide_rows", "staged"})
    # unlabeled: staged does not apply under "auto", whatever the models say
    nk0 = ek0 = Constant(1.0)
    systems = [prepare_graph(_graph(n, 0.3, n), k, nk0, ek0, q=0.05) for k, n in enumerate(sizes)]
    config = _config(systems, nk0, ek0)
    db = _fake_db(backend, systems, config)
    stats = {}
    wide._solve(drv, FakeModule(config, nk0, ek0), db, 0, 1, 1e-10, 500, WIDE_BLOCK, None, stats, config, "auto",
                values=kernel_values(nk0, ek0), cost_models=models(1.0, 1e-12))  # fmt: skip
    assert stats["xmv"] == "rows"


def test_fake_pipeline_pack_is_what_solve_uploads(fake_backend, monkeypatch) -> None:
    """Pipeline [Load, Pack, Solve(gpu)]: the Pack stage builds the backend's batch, the Solve
    stage's backend uploads it without packing again ("adopted"); gpu_options reach the
    backend; without a Pack stage the backend packs itself; K matches the CPU backend."""
    from mgkflow.pipeline import Load, Pack, Pipeline, Solve

    drv, backend = fake_backend
    graphs = [_rgg(30, 3), _rgg(22, 4), _rgg(17, 5)]
    nk, ek = KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length")
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    config = _config(systems, nk, ek, xmv="rows", row_ilp=2)

    def factory(src: str) -> Any:
        if "wide_xmv" in src:
            return FakeModule(config, nk, ek, int(re.search(r"#define BLOCK (\d+)", src).group(1)))
        return _SolverStub([])

    sys.modules["pycuda.compiler"].factory = factory
    packs: list[int] = []
    real_pack = backend.pack_host
    for where in (backend, batch):  # GPUBackend.host_batch, BatchCache.device_batch
        monkeypatch.setattr(where, "pack_host", lambda *a, **kw: packs.append(1) or real_pack(*a, **kw))
    opts = {"wide": True, "wide_xmv": "rows"}
    solve = Solve(nk, ek, q=0.05, backend="gpu", rtol=1e-10, gpu_options=opts)
    res = Pipeline([Load(graphs), Pack(), solve]).run()
    st = res.stats.set_index("stage")
    assert st.loc["pack", "for"] == "gpu" and st.loc["solve", "pack"] == "adopted" and packs == []
    assert solve.kernel._backend_obj.wide is True and solve.kernel._backend_obj.wide_xmv == "rows"
    ref = Pipeline([Load(graphs), Solve(nk, ek, q=0.05, backend="cpu")]).run().gram
    np.testing.assert_allclose(res.gram, ref, rtol=1e-7)
    res2 = Pipeline([Load(graphs), Solve(nk, ek, q=0.05, backend="gpu", rtol=1e-10, gpu_options=opts)]).run()
    assert res2.stats.set_index("stage").loc["solve", "pack"] == "packed" and len(packs) == 1
    np.testing.assert_allclose(res2.gram, ref, rtol=1e-7)


def test_fake_calibration_measurement(fake_backend) -> None:
    """mgkflow.bench.gpu_calibrate._measure on the fake driver: each wide strategy is forced,
    K is right and the features of its cost model come back."""
    from mgkflow.bench.gpu_calibrate import _measure, geometric_graph
    from mgkflow.gpu import strategies

    drv, backend = fake_backend
    g1, g2 = geometric_graph(60, 1), geometric_graph(45, 2)
    nk, ek = KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length")
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate((g1, g2))]
    config = _config(systems, nk, ek, xmv="rows", row_ilp=2)

    def factory(src: str) -> Any:
        if "wide_xmv" in src:
            return FakeModule(config, nk, ek, int(re.search(r"#define BLOCK (\d+)", src).group(1)))
        return _SolverStub([])

    sys.modules["pycuda.compiler"].factory = factory
    ref = solve_pair(systems[0], systems[1], nk, ek, rtol=1e-12).value
    for name in ("wide_rows", "staged"):
        r = _measure(g1, g2, nk, ek, 0.05, name, reps=2)
        assert r["converged"] and abs(r["value"] - ref) <= 1e-5 * abs(ref), name
        assert set(strategies.get(name).feature_names) == {k[2:] for k in r if k.startswith("f_")}
        assert r["seconds"] == r["device_s"] / r["iterations"]
