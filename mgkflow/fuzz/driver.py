"""The long fuzz run: ``python -m mgkflow.bench fuzz [--examples N] [--seed S] [--out CSV]``."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks import Outcome
from .known import known_cases
from .targets import properties

__all__ = ["Tally", "run", "main"]


@dataclass
class Tally:
    """Outcome counts and one reproducer per bad category."""

    counts: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, suite: str, outcome: Outcome, repro: str) -> None:
        state = "bad" if outcome.kind == "bad" and not outcome.excused else (
            "excused" if outcome.kind == "bad" else outcome.kind)
        self.counts[(suite, state, outcome.category)] += 1
        if outcome.kind == "bad" and outcome.category not in self.examples:
            self.examples[outcome.category] = f"{repro}  # {outcome.detail}"


def run(examples: int = 200, seed: int = 0) -> Tally:
    """Run every property with ``examples`` examples each (derandomized by ``seed``)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    from .targets import strategies

    s = strategies()
    tally = Tally()
    cfg = settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                   suppress_health_check=list(HealthCheck))

    def prop(name: str, strat: Any, runner: Callable[[Any], Outcome], repro: Callable[[Any], str]) -> None:
        @hseed(seed)
        @cfg
        @given(strat)
        def body(case):
            tally.add(name, runner(case), repro(case))

        body()

    for p in properties():
        prop(p.name, s[p.inputs], p.run, p.repro)
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mgkflow.bench fuzz",
        description="Fuzz the API, file readers and CLI; print outcomes by kind and a reproducer per bad category.",
    )
    parser.add_argument("--examples", type=int, default=200, help="examples per property (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    parser.add_argument("--out", type=Path, default=Path("reports") / "fuzz.csv", help="CSV of counts")
    args = parser.parse_args(argv)
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        print("the fuzz suite needs hypothesis: pip install hypothesis", file=sys.stderr)
        return 2
    tally = run(args.examples, args.seed)
    import pandas as pd

    from mgkflow.io import atomic_write

    rows = [{"suite": s, "outcome": k, "category": c, "count": n} for (s, k, c), n in sorted(tally.counts.items())]
    df = pd.DataFrame(rows)
    atomic_write(args.out, lambda t: df.to_csv(t, index=False))
    total = int(df["count"].sum())
    print(f"{total} inputs tried ({args.examples} per property, seed {args.seed})")
    print(df.groupby(["suite", "outcome"])["count"].sum().to_string())
    print("\nby category:")
    print(df.to_string(index=False))
    if tally.examples:
        print("\none reproducer per bad category (from mgkflow.fuzz import *):")
        for cat, ex in sorted(tally.examples.items()):
            print(f"[{cat}] {ex}")
    print("\nknown rough inputs (issue 12):")
    for name, case in known_cases().items():
        o = case()
        state = "excused" if o.excused else o.kind
        print(f"  {name:34s} {state:8s} {o.category:42s} {o.detail[:90]}")
        tally.counts[("known", state, o.category)] += 1
    df = pd.DataFrame([{"suite": s, "outcome": k, "category": c, "count": n}
                       for (s, k, c), n in sorted(tally.counts.items())])
    atomic_write(args.out, lambda t: df.to_csv(t, index=False))
    bad = int(df[df["outcome"] == "bad"]["count"].sum())
    print(f"\n{bad} bad outcomes not excused; wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
