"""Streams captured from the real CLIs by the conformance tier
(``tests/data/real/<cli>-<version>/<scenario>.jsonl``), replayed through
``normalize``: each dialect must read them as the tier's table says, without
any CLI installed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.real.clis import CLIS
from tests.real.expectations import EXPECTED, expected
from wrapper.commands.normalize import normalize
from wrapper.core.framing import DEFAULT_MAX_LINE_BYTES

CAPTURES = Path(__file__).parent / "data" / "real"

CASES = sorted(
    (path.parent.name.rsplit("-", 1)[0], path)
    for path in CAPTURES.glob("*/*.jsonl")
    # A steered run's stdout.log holds two processes' streams one after the other.
    if path.parent.name.rsplit("-", 1)[0] in EXPECTED and not path.stem.startswith("steer")
)


#: Rows whose fix is made on another branch: (cli, scenario) -> what is missing.
#: Not strict, so the merge that fixes one shows it as XPASS; then remove it.
PENDING_ELSEWHERE: dict[tuple[str, str], str] = {}


def summary(cli: str, path: Path, exit_code: int) -> dict[str, object]:
    out = io.BytesIO()
    with path.open("rb") as source:
        normalize(
            source,
            out,
            dialect_name=CLIS[cli].dialect,
            summary=True,
            exit_code=exit_code,
            max_line_bytes=DEFAULT_MAX_LINE_BYTES,
        )
    result: dict[str, object] = json.loads(out.getvalue())
    return result


def test_captures_are_there() -> None:
    assert {cli for cli, _ in CASES} == set(EXPECTED)


@pytest.mark.parametrize(
    ("cli", "path"),
    [
        pytest.param(
            cli,
            path,
            id=f"{path.parent.name}-{path.stem}",
            marks=[pytest.mark.xfail(reason=PENDING_ELSEWHERE[cli, path.stem], strict=False)]
            if (cli, path.stem) in PENDING_ELSEWHERE
            else [],
        )
        for cli, path in CASES
    ],
)
def test_capture_reads_as_the_table_says(cli: str, path: Path) -> None:
    expect = expected(cli, path.parent.name.rsplit("-", 1)[1])[path.stem]
    got = summary(cli, path, expect.exit)
    assert (got["stopReason"], got["rawStopReason"]) == (expect.stop, expect.raw)
    if expect.final is not None:
        assert got["finalText"] == expect.final
    assert tuple(got["toolsUsed"]) == expect.tools  # type: ignore[arg-type]
