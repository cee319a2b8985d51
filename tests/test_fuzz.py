"""Property-based fuzzing of the API, the file readers and the CLI (mgkflow.bench.fuzz).

Every input must give a finite, symmetric, PSD Gram matrix (or a Graph /
GraphSet / CLI result with a complete output file) or an mgkflow error; never a
foreign exception, a built-in exception from mgkflow code, NaN/inf, a leaked
warning, a hang (per-case limit) or a half-written file.

Fixed seed; ``MGKFLOW_FUZZ_EXAMPLES`` scales the number of examples (CI: the
defaults below, about half a minute on two cores). Bad outcomes whose cause
lies in mgk.py/system.py/cpu_solver.py/kernels.py are listed with their reason
in ``mgkflow.bench.fuzz.KNOWN_ELSEWHERE`` and do not fail here; set
``MGKFLOW_FUZZ_STRICT=1`` (or remove entries) to make them fail. A long run:
``python -m mgkflow.bench fuzz --examples 2000``.
"""

from __future__ import annotations

import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

from mgkflow.bench import fuzz  # noqa: E402

SCALE = float(os.environ.get("MGKFLOW_FUZZ_EXAMPLES", "1"))  # a multiplier of the CI defaults


def _settings(n: int):
    return settings(
        max_examples=max(1, int(n * SCALE)), deadline=None, database=None, derandomize=False,
        suppress_health_check=list(HealthCheck),
    )


S = fuzz.strategies()


def _assert_ok(outcome: fuzz.Outcome, repro: str) -> None:
    if outcome.kind == "bad" and not outcome.excused:
        raise AssertionError(f"{outcome.category}: {outcome.detail}\nreproduce: {repro}")


@seed(12)
@_settings(400)
@given(S["api"])
def test_fuzz_api(case):
    _assert_ok(fuzz.run_api_case(case), f"run_api_case({fuzz._py(case)})")


@seed(16)
@_settings(100)
@given(S["valid_wide"])
def test_fuzz_api_valid_inputs(case):
    _assert_ok(fuzz.run_api_case(case), f"run_api_case({fuzz._py(case)})")


@seed(13)
@_settings(40)
@given(S["valid_api"])
def test_fuzz_scale_invariance(case):
    _assert_ok(fuzz.run_scale_case(case), f"run_scale_case({fuzz._py(case)})")


@seed(14)
@_settings(400)
@given(S["file"])
def test_fuzz_files(case):
    _assert_ok(fuzz.run_file_case(*case), f"run_file_case({fuzz._py(case[0])}, {fuzz._py(case[1])})")


@seed(15)
@_settings(100)
@given(S["cli"])
def test_fuzz_cli(case):
    _assert_ok(fuzz.run_cli_case(case), f"run_cli_case({fuzz._py(case)})")


@pytest.mark.parametrize("name", sorted(fuzz.known_cases()))
def test_known_rough_inputs(name):
    _assert_ok(fuzz.known_cases()[name](), f"known_cases()[{name!r}]()")


# ---------------------------------------------------------------------- the checker itself
def test_checker_flags_what_it_must():
    import numpy as np

    assert fuzz.check_gram(np.eye(2)).kind == "result"
    assert fuzz.check_gram(np.array([[1.0, np.nan], [np.nan, 1.0]])).category == "nan"
    assert fuzz.check_gram(np.array([[1.0, 0.5], [0.0, 1.0]])).category == "asymmetric"
    assert fuzz.check_gram(np.array([[1.0, 2.0], [2.0, 1.0]])).category == "not-psd"


def test_guard_classifies_exceptions_warnings_and_hangs(monkeypatch):
    import time
    import warnings

    import numpy as np

    from mgkflow.errors import GraphError

    def graph_error():
        raise GraphError("x")

    def numpy_error():
        np.zeros(2).reshape(3)

    def warn():
        warnings.warn("leak", RuntimeWarning, stacklevel=1)

    assert fuzz.guarded(graph_error).kind == "error"
    out = fuzz.guarded(numpy_error)
    assert out.kind == "bad" and out.category.startswith("foreign:ValueError@")
    assert fuzz.guarded(warn).category.startswith("warning:RuntimeWarning")
    monkeypatch.setattr(fuzz, "CASE_SECONDS", 0.2)
    assert fuzz.guarded(lambda: time.sleep(5)).category == "hang"


def test_exclusions_only_excuse_other_owners(monkeypatch):
    own = fuzz.Outcome("bad", "foreign:ValueError@graph.py")
    other = fuzz.Outcome("bad", "foreign:ValueError@system.py")
    assert not own.excused and not other.excused  # nothing is excused today
    monkeypatch.setattr(fuzz, "KNOWN_ELSEWHERE", {"foreign:": "a category under repair elsewhere"})
    assert not own.excused and other.excused
    assert not fuzz.Outcome("bad", "half-written@io/_files.py").excused
