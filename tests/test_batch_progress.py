"""The pretty output's counts: kept as runs start and end, so that a batch of
20,000 runs is not recounted at every finish."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio

from wrapper.core.config import OutputMode
from wrapper.fleet.batch import Batch, BatchRun, Progress


class CountingList(list[BatchRun]):
    """A list that counts how often it is gone through."""

    walks = 0

    def __iter__(self) -> Any:
        CountingList.walks += 1
        return super().__iter__()


class Pump:
    def __init__(self) -> None:
        self.written = bytearray()

    def write(self, data: bytes) -> None:
        self.written += data


def item(n: int) -> BatchRun:
    prepared: Any = SimpleNamespace(config=SimpleNamespace(run_dir=Path(f"/runs/r{n}")))
    return BatchRun(f"r{n}", f"r{n}", n + 1, prepared, {}, index=n)


def test_a_finish_costs_the_same_however_many_runs_there_are() -> None:
    total = 20_000
    runs = CountingList(item(n) for n in range(total))
    batch = Batch(runs=runs, runs_dir=Path("/runs"), jobs=8, output=OutputMode.PRETTY)
    pump = Pump()

    async def main() -> str:
        progress = Progress(batch, pump, color=False, redraw=False)  # type: ignore[arg-type]
        walks = CountingList.walks
        for n, run in enumerate(runs[:total]):
            run.state = "running"
            progress.started(run)
            run.result = {"outcome": "ok" if n % 10 else "error"}
            run.state = "done"
            progress.finished(run)
            if n == total // 2:
                assert progress.line(0).startswith(
                    f"[batch] {n + 1}/{total} done, 0 running, {n // 10 + 1} failed, "
                    f"{total - n - 1} waiting"
                )
        assert CountingList.walks == walks, "the runs were gone through again"
        progress.finish(61)
        return pump.written.decode()

    written = trio.run(main).splitlines()
    assert len(written) == 2 * total + 1
    assert written[0] == "started r0 [/runs/r0]"
    assert written[1].startswith("FAILED r0 (error, ")
    assert written[-1] == (
        f"[batch] {total}/{total} done, 0 running, 2000 failed, 0 waiting, 1:01 "
        "(finished; /runs/batch.json)"
    )
