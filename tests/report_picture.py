"""The picture of the HTML report in docs/batch.md, and what it shows.

``docs/report.png`` is a headless chromium's screenshot of the report of a
demo batch on the fake agent (``examples/report/spec.jsonl``; three of its
runs fail on purpose, and while it runs one run is steered from outside and
one aborted, as a person would). The picture carries the text of the page it was taken of
(an ``iTXt`` chunk of the PNG, with what changes from run to run replaced),
so a test can make the page again and tell whether the picture still shows
what the report shows today.

``python -m tests.report_picture`` (``scripts/report-screenshot``, and
``scripts/docs-samples``) remakes the picture; ``--check`` only compares.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PICTURE = ROOT / "docs" / "report.png"
SPEC = ROOT / "examples" / "report" / "spec.jsonl"
#: The screenshot's size: the page's header, timeline and table fit.
WIDTH, HEIGHT = 1280, 1100
#: The PNG text chunk's keyword.
KEYWORD = b"agent-wrapper report text"
#: The demo batch ends 1: three of its runs do not pass.
BATCH_EXIT = 1
#: The demo's runs a person steers and aborts while the batch runs.
STEERED, ABORTED = "build-then-fix", "wrong-direction"
#: Bound for the batch to reach them (they wait for a free place).
REACH_TIMEOUT = 60.0

#: What changes from one making of the page to the next, and what stands for it.
_VARYING = (
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"), "TIME"),
    (re.compile(r"\b\d+ h \d+ min\b|\b\d+ min \d+ s\b|\b\d+(\.\d+)? s\b"), "N s"),
)


class NotMade(RuntimeError):
    """The page or its picture could not be made; the text says why."""


def page(work: Path) -> Path:
    """The report page of the demo batch, made in ``work``."""
    program = str(ROOT / ".venv" / "bin" / "agent-wrapper")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_WRAPPER_")}
    runs = work / "runs"
    argv = [program, "batch", str(SPEC), "--jobs", "3", "--runs-dir", str(runs)]
    batch = subprocess.Popen(
        [*argv, "--output", "quiet"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for label, args in (
            (STEERED, ["steer", "--text", "Stop building; fix the parser first"]),
            (ABORTED, ["abort", "--reason", "wrong direction"]),
        ):
            _wait_for_tool(runs / label, batch)
            done = subprocess.run(
                [program, args[0], str(runs / label), *args[1:]],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            if done.returncode != 0:
                raise NotMade(f"could not {args[0]} {label}: {done.stderr}")
        _, stderr = batch.communicate(timeout=120)
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()
    if batch.returncode != BATCH_EXIT:
        raise NotMade(
            f"the demo batch should end {BATCH_EXIT} (three runs fail), it ended "
            f"{batch.returncode}: {stderr[-2000:]}"
        )
    html = work / "report.html"
    subprocess.run(
        [program, "report", "runs", "--html", str(html)],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=True,
    )
    return html


def _wait_for_tool(run_dir: Path, batch: subprocess.Popen[str]) -> None:
    """Until the run is in its long tool and takes steers from outside."""
    deadline = time.monotonic() + REACH_TIMEOUT
    while time.monotonic() < deadline and batch.poll() is None:
        try:
            status = json.loads((run_dir / "status.json").read_text())
        except (OSError, ValueError):
            status = {}
        if status.get("currentTool") is not None and status.get("control") is not None:
            return
        time.sleep(0.05)
    raise NotMade(f"{run_dir.name} never reached its tool (batch exit {batch.poll()})")


def shown_text(text: str, work: Path) -> str:
    """The page's text with what changes from run to run replaced."""
    text = text.replace(str(work), "WORK").replace(str(ROOT), ".")
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    # The timeline's scale follows the batch's wall time: its ticks say nothing.
    return re.sub(r"(Timeline\n)(N s\n)+", r"\1", text)


def render(html: Path, work: Path, out_png: Path) -> str:
    """Screenshot ``html`` into ``out_png``; the page's shown text."""
    from tests.browser import render as render_page

    shown = render_page(html, out_png=out_png, width=WIDTH, height=HEIGHT)
    if shown.requests or shown.csp_violations or shown.console_errors:
        raise NotMade(f"the page did more than show itself: {shown}")
    return shown_text(shown.text, work)


def _chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """The chunks of ``png`` after its signature: (kind, whole chunk)."""
    chunks, at = [], 8
    while at + 8 <= len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        chunks.append((png[at + 4 : at + 8], png[at : at + 12 + length]))
        at += 12 + length
    return chunks


def _ours(chunk: bytes) -> bool:
    return chunk[4:8] == b"iTXt" and chunk[8:].startswith(KEYWORD + b"\0")


def with_text(png: bytes, text: str) -> bytes:
    """``png`` with ``text`` in an ``iTXt`` chunk (UTF-8, uncompressed) before
    its end, in place of one it carried."""
    data = KEYWORD + b"\0\0\0\0\0" + text.encode()
    mine = struct.pack(">I", len(data)) + b"iTXt" + data
    mine += struct.pack(">I", zlib.crc32(b"iTXt" + data))
    kept = [chunk for kind, chunk in _chunks(png) if kind != b"IEND" and not _ours(chunk)]
    end = [chunk for kind, chunk in _chunks(png) if kind == b"IEND"]
    return png[:8] + b"".join([*kept, mine, *end])


def text_of(png: bytes) -> str | None:
    """The text ``with_text`` put in ``png``, or None."""
    for _, chunk in _chunks(png):
        if _ours(chunk):
            return chunk[8 + len(KEYWORD) + 5 : -4].decode()
    return None


def make(picture: Path = PICTURE) -> None:
    with tempfile.TemporaryDirectory(prefix="report-picture-") as folder:
        work = Path(folder)
        shot = work / "report.png"
        text = render(page(work), work, shot)
        picture.write_bytes(with_text(shot.read_bytes(), text))


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        with tempfile.TemporaryDirectory(prefix="report-picture-") as folder:
            work = Path(folder)
            now = render(page(work), work, work / "report.png")
        if text_of(PICTURE.read_bytes()) != now:
            print(f"report-picture: {PICTURE} does not show the page of today", file=sys.stderr)
            return 1
        return 0
    if argv:
        print("usage: python -m tests.report_picture [--check]", file=sys.stderr)
        return 2
    make()
    print(PICTURE.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
