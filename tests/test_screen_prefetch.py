"""The in-process screen featurizes the next chunk in a helper thread while it predicts the current one
(mgkflow/learn/screening.py: _run_here, _prepare_chunk): the same output as predicting from SMILES, the
model's predict given the featurized inputs, and a chunk the featurizer refuses found again one by one."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from mgkflow.errors import ParameterError

pytest.importorskip("rdkit")

from mgkflow.learn.screening import screen  # noqa: E402

SMILES = ["CCO", "c1ccccc1", "CC(=O)O", "not a smiles", "CCN", "[Na+].[Cl-]", "CCCC", "O", "CS", "C1CC1", "CCBr"]


class _SmilesModel:
    """predict(SMILES): the mean is the string's length, the std the count of carbons; refuses bromine."""

    def predict(self, X, return_std=False):
        if any("Br" in x for x in X):
            raise ParameterError("no bromine here")
        mean = np.array([float(len(x)) for x in X])
        std = np.array([float(x.count("C") + x.count("c")) for x in X])
        return (mean, std) if return_std else mean


class _Featurized(_SmilesModel):
    """The same predictions through featurize: predict takes the tuples featurize made, in a helper thread."""

    def __init__(self) -> None:
        self.featurize_threads: set[str] = set()
        self.predicted_inputs: list[object] = []

    def featurize(self, X):
        self.featurize_threads.add(threading.current_thread().name)
        if any("Br" in x for x in X):
            raise ParameterError("no bromine here")
        return [("featurized", x) for x in X]

    def predict(self, X, return_std=False):
        self.predicted_inputs.extend(X)
        return super().predict([x[1] if isinstance(x, tuple) else x for x in X], return_std)


def test_prefetched_chunks_give_the_same_output(tmp_path: Path) -> None:
    src = tmp_path / "in.smi"
    src.write_text("\n".join(SMILES) + "\n")
    plain = screen(_SmilesModel(), src, tmp_path / "plain.csv", chunk_size=3, progress=False)
    model = _Featurized()
    ahead = screen(model, src, tmp_path / "ahead.csv", chunk_size=3, progress=False)
    assert (tmp_path / "ahead.csv").read_bytes() == (tmp_path / "plain.csv").read_bytes()
    assert ahead.failed == plain.failed == 2  # the unparsable line, and the bromine the model refuses either way
    assert model.featurize_threads and all(t.startswith("mgkflow-featurize") for t in model.featurize_threads)
    tuples = [x for x in model.predicted_inputs if isinstance(x, tuple)]
    # every chunk but the refused one (C1CC1 and CCBr, then one by one from their SMILES) went as features
    assert len(tuples) == 8 and {"C1CC1", "CCBr"} <= set(model.predicted_inputs)


class _Slow(_Featurized):
    """Featurizing takes 30 ms a chunk and predicting 10 ms: the stages the result reports."""

    def featurize(self, X):
        import time

        time.sleep(0.03)
        return super().featurize(X)

    def predict(self, X, return_std=False):
        import time

        time.sleep(0.01)
        return super().predict(X, return_std)


def test_stage_seconds(tmp_path: Path) -> None:
    src = tmp_path / "in.smi"
    src.write_text("\n".join(["CCO", "CCN", "CCC", "CCCl", "CO", "CN"]) + "\n")
    res = screen(_Slow(), src, tmp_path / "out.csv", chunk_size=2, progress=False)
    assert res.featurize_seconds >= 3 * 0.03  # three chunks, each featurized once in the helper
    assert res.predict_seconds >= 3 * 0.01
    # the first chunk cannot overlap, and later ones featurize longer than the chunk before predicts
    assert res.wait_seconds >= 0.03
    assert res.wait_seconds + res.predict_seconds <= res.seconds


class _CountingModel(_Featurized):
    """A model whose ``featurize_checked`` checks and featurizes a chunk (as MolecularGPR's featurizing processes
    do, each SMILES parsed once); records the SMILES it was asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[list[str]] = []

    def featurize_checked(self, smiles):
        from rdkit import Chem

        self.asked.append(list(smiles))
        mols = [Chem.MolFromSmiles(s) for s in smiles]
        errors = ["invalid SMILES: RDKit could not parse it" if m is None else "no heavy atom"
                  if m.GetNumHeavyAtoms() == 0 else "" for m in mols]  # fmt: skip
        return [("checked", s) for s, e in zip(smiles, errors) if not e], errors


class _NoParsing:
    """An RDKit stand-in for the screen's own process: parsing there fails the test."""

    @staticmethod
    def MolFromSmiles(smiles):
        raise AssertionError(f"parsed {smiles!r} in the screen's process")


def test_chunk_checked_and_featurized_by_the_model_at_once(tmp_path: Path) -> None:
    from mgkflow.io.smiles_stream import SmilesRecord
    from mgkflow.learn.screening import _prepare_chunk

    smiles = ["CCO", "not a smiles", "[H][H]", "*C", "c1ccccc1"]
    records = [SmilesRecord(line=i + 1, smiles=s, id=None, fields=(s,)) for i, s in enumerate(smiles)]
    records.append(SmilesRecord(line=6, smiles="", id=None, fields=("", "x"), error="malformed line"))
    model = _CountingModel()
    valid, errors, inputs = _prepare_chunk(model, records, _NoParsing)
    assert model.asked == [smiles]  # the readable records, once, none parsed here
    assert not model.featurize_threads  # featurize_checked made the inputs: featurize was not called
    assert valid == [0, 3, 4] and inputs == [("checked", s) for s in ("CCO", "*C", "c1ccccc1")]
    assert errors == ["", "invalid SMILES: RDKit could not parse it", "no heavy atom", "", "", "malformed line"]
    # a model without it: the same checks, by RDKit in this process, then featurize
    from rdkit import Chem

    assert _prepare_chunk(_Featurized(), records, Chem) == (valid, errors, [("featurized", s) for s in
                                                                            ("CCO", "*C", "c1ccccc1")])  # fmt: skip


class _RefusesChecked(_Featurized):
    """featurize_checked refuses (as a MolecularGPR fitted on Graphs does): the checks and featurize as without."""

    def featurize_checked(self, smiles):
        raise ParameterError("fitted on Graphs")


def test_a_refused_featurize_checked_falls_back_to_the_checks_here() -> None:
    from rdkit import Chem

    from mgkflow.io.smiles_stream import SmilesRecord
    from mgkflow.learn.screening import _prepare_chunk

    records = [SmilesRecord(line=i + 1, smiles=s, id=None, fields=(s,)) for i, s in enumerate(["CCO", "xx"])]
    assert _prepare_chunk(_RefusesChecked(), records, Chem) == (
        [0], ["", "invalid SMILES: RDKit could not parse it"], [("featurized", "CCO")]
    )
