"""How long each real CLI takes to exit by itself after its end-of-run event.

Runs the ``plain`` and ``tool`` scenarios of each CLI several times with a
grace long enough that the wrapper never ends the agent, and prints, per CLI
and scenario, the seconds from the end-of-run event (the normalized
``agent_end``, else the final message) to the process's exit. These figures
are what the per-dialect grace defaults are chosen from.

    AGENT_WRAPPER_CLIS=~/.cache/agent-wrapper/clis \\
        .venv/bin/python -m tests.real.measure [--runs N] [CLI[@VERSION] ...]

A CLI without a version is measured at its first pin (``claude@2.1.332``
names another of its pins).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from tests.real.clis import CLIS
from tests.real.harness import exit_latencies, mock_server_running, run_case

#: Long enough that no agent is ended by the wrapper while it is measured.
PATIENT = ["--grace", "60", "--settle-grace", "60"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also append the raw figures to this file")
    parser.add_argument("clis", nargs="*", default=list(CLIS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="measure-") as tmp:
        base = Path(tmp)
        with mock_server_running(base / "requests.jsonl") as mock:
            for spec in args.clis:
                name, _, version = spec.partition("@")
                for scenario in ("plain", "tool"):
                    figures: list[float] = []
                    for n in range(args.runs):
                        case = run_case(
                            name,
                            scenario,
                            base / f"{name}-{scenario}-{n}",
                            mock,
                            version=version or None,
                            options=PATIENT,
                        )
                        figures += exit_latencies(case)
                    if not figures:
                        print(f"{spec:9} {scenario:6} no end-of-run event seen", flush=True)
                        continue
                    print(
                        f"{spec:9} {scenario:6} n={len(figures)} min={min(figures):.2f}s "
                        f"median={statistics.median(figures):.2f}s max={max(figures):.2f}s",
                        flush=True,
                    )
                    if args.json:
                        with args.json.open("a") as handle:
                            entry = {"cli": spec, "scenario": scenario, "seconds": figures}
                            handle.write(json.dumps(entry) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
