"""The ```python code blocks of README.md run as written.

Each block runs with ``exec`` in a fresh namespace, in its own temporary working
directory (blocks write files such as ``molecules.sdf`` and ``K.zarr`` there). Blocks that
import RDKit are skipped where RDKit is absent (``pip install mgkflow[chem]``).
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> list[tuple[int, int, str]]:
    """(block number from 1, README line of the block's first code line, code) of every ```python block."""
    return [(k, text.count("\n", 0, m.start(1)) + 1, m.group(1)) for k, m in enumerate(FENCE.finditer(text), 1)]


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def _block_id(block: tuple[int, int, str]) -> str:
    number, _, code = block
    first = next((line.strip() for line in code.splitlines() if line.strip()), "")
    return f"block{number}-{re.sub(r'[^A-Za-z0-9_.]+', '_', first)[:40].strip('_')}"


def test_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 5, f"expected the README's python examples, found {len(BLOCKS)} ```python blocks"


def test_block_extraction() -> None:
    text = "x\n```python\na = 1\n```\n\n    ```python (indented: not a block)\n```python\nb = 2\nc = 3\n```\n"
    assert python_blocks(text) == [(1, 3, "a = 1\n"), (2, 8, "b = 2\nc = 3\n")]


# the GPR block fits 30 molecules: scikit-learn warns that a hyperparameter ends at its bound (the README says so)
@pytest.mark.filterwarnings("ignore:The optimal value found for dimension")
@pytest.mark.parametrize("block", BLOCKS, ids=[_block_id(b) for b in BLOCKS])
def test_readme_block_runs(block: tuple[int, int, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    number, line, code = block
    if re.search(r"^\s*(from|import)\s+rdkit\b", code, re.MULTILINE):
        pytest.importorskip("rdkit", reason="this README block needs RDKit (pip install mgkflow[chem])")
    monkeypatch.chdir(tmp_path)
    name = f"README.md python block {number} (line {line})"
    failure = None
    try:  # compiled as README.md, padded so that tracebacks give README line numbers
        exec(compile("\n" * (line - 1) + code, str(README), "exec"), {"__name__": f"readme_block_{number}"})
    except Exception as exc:  # noqa: BLE001 - any error of a block is a README bug
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next))
        failure = f"{name} failed: {type(exc).__name__}: {exc}\n\n{tb}"
    if failure is not None:
        pytest.fail(failure, pytrace=False)
