"""Property-based fuzzing of the public API, the file readers, scikit-learn use and the CLI (needs hypothesis).

Every input must end in one of two ways:

- a result: a finite, symmetric, positive semi-definite Gram matrix (eigenvalues
  >= -1e-8 x the largest magnitude), a Graph, a GraphSet, or a CLI exit code
  with a complete output file (or none);
- a clean error: an exception derived from :class:`mgkflow.errors.MgkflowError`.

Anything else is a *bad* outcome, filed under a category that names the kind
and the mgkflow file responsible (the innermost mgkflow frame of the
traceback): ``foreign:ValueError@graph.py`` (a numpy/scipy/... exception
escaping), ``plain:TypeError@kernels.py`` (a built-in exception raised by
mgkflow code instead of an mgkflow error), ``warning:RuntimeWarning@system.py``
(warnings are errors inside a case), ``nan``, ``asymmetric``, ``not-psd``,
``hang`` (per-case time limit), ``scale-variance`` (K changed when every
weight was multiplied by one constant), ``cli-traceback``, ``half-written``.

:data:`KNOWN_ELSEWHERE` lists the categories whose cause lies in files another
work package owns; they are counted and reported with a reproducer but do not
fail the test suite. Empty it (or set ``MGKFLOW_FUZZ_STRICT=1``) to see them fail.

Run ``python -m mgkflow.bench fuzz --examples 2000`` for a long run: it prints
the inputs tried, outcomes by kind and one reproducer per bad category, and
writes ``reports/fuzz.csv``. ``tests/test_fuzz.py`` runs the same properties
with fewer examples (``MGKFLOW_FUZZ_EXAMPLES`` scales them).

Reproducers are calls like ``run_api_case({...})``: paste them in Python.

Layout (one module per job; the old single module ``mgkflow.bench.fuzz`` is a deprecated alias of this package):

======================== ==============================================================
module                   what it holds
======================== ==============================================================
:mod:`.checks`           :class:`Outcome`, :func:`guarded`, :func:`classify_exception`,
                         :func:`check_gram`, :data:`KNOWN_ELSEWHERE`, :class:`Property`
:mod:`.inputs`           the shared hypothesis strategies (graph and kernel specs, damaged
                         file text) and the builders of graphs and kernels from specs
:mod:`.targets`          one module per target (:mod:`~.targets.api`,
                         :mod:`~.targets.files`, :mod:`~.targets.cli`): its case runner,
                         its strategies and its properties; :data:`~.targets.TARGETS`
:mod:`.known`            :func:`known_cases`: the rough inputs of earlier runs, by name
:mod:`.driver`           the long run and its command line (:func:`run`, :func:`main`)
======================== ==============================================================
"""

# ``X as X``: names of the old module mgkflow.bench.fuzz that were not in its __all__, kept importable here
from .checks import CASE_SECONDS as CASE_SECONDS
from .checks import KNOWN_ELSEWHERE, Outcome, check_gram, classify_exception
from .checks import OTHER_OWNERS as OTHER_OWNERS
from .checks import FuzzTimeout as FuzzTimeout
from .checks import Property as Property
from .checks import _py as _py
from .checks import guarded as guarded
from .driver import Tally as Tally
from .driver import main
from .driver import run as run
from .known import known_cases
from .targets import TARGETS as TARGETS
from .targets import strategies
from .targets.api import SCALES as SCALES
from .targets.api import run_api_case, run_scale_case
from .targets.cli import run_cli_case
from .targets.files import run_file_case
from .targets.readers import run_reader_case
from .targets.sklearn import run_sklearn_case

__all__ = [
    "KNOWN_ELSEWHERE",
    "Outcome",
    "classify_exception",
    "check_gram",
    "known_cases",
    "run_api_case",
    "run_scale_case",
    "run_file_case",
    "run_cli_case",
    "run_reader_case",
    "run_sklearn_case",
    "strategies",
    "main",
]

