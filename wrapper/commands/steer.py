"""``steer`` and ``abort``: reach a running run from outside through its
control socket (``wrapper.supervision.control_server``), and the blocking
client ``wrapper.steer`` and ``wrapper.abort`` share with them.

The socket is found through the run's status.json (``control``); the
client sends one request and reads receipts until the steer settled or the
wait ran out. Nothing is polled.

``steer`` exits 0 delivered (the agent acknowledged it) or sent (on a live
agent's input, not acknowledged yet when the wait ended), 1 refused (or the
run is not running, or takes no requests), 124 still queued when the wait
ended, 75 the run is busy with other requests (try again), 2 usage;
``abort`` exits 0 once the run ended, 1 refused (or not running), 124
accepted but still ending when the wait ended, 75 busy, 2 usage.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from wrapper.core.control import SOCKET_NAME, delivered_how, text_bytes
from wrapper.core.jsonout import dumps
from wrapper.core.limits import STEER_MAX_BYTES
from wrapper.files import batch_mark, control_socket, mailbox

PROG = "agent-wrapper"
#: The default wait for a receipt, in seconds.
DEFAULT_WAIT = 30.0
#: Exit status when the wait ended before the request settled (as timeout(1)).
EXIT_STILL_WAITING = 124
#: Exit status when the run is busy with other requests and took no more:
#: try again (EX_TEMPFAIL of sysexits.h), apart from 1, the run takes none.
EXIT_BUSY = 75
#: How long the run may take to acknowledge a request, whatever the wait.
ACK_TIMEOUT = 10.0
#: A receipt line longer than this is not the run's.
RECEIPT_MAX_BYTES = 64 * 1024


class NotARun(ValueError):
    """RUN_DIR is no run's directory: a usage error; the text says why."""


class TooLong(ValueError):
    """A steer's text is larger than any run takes: a usage error."""


def check_size(text: str) -> None:
    """Raises ``TooLong`` for a text no run takes (a run may take less: its
    receipt then says how much)."""
    if text_bytes(text) > STEER_MAX_BYTES:
        raise TooLong(
            f"the text is more than the {STEER_MAX_BYTES} bytes a steer may hold; "
            "put it in a file the agent can read and steer it there"
        )


@dataclass(frozen=True, slots=True)
class Receipt:
    """What the run said of a request. ``state``: for a steer ``delivered``,
    ``refused``, ``sent`` (on a live agent's input, not acknowledged when
    the wait ended) or ``queued`` (still waiting when the wait ended); for an
    abort ``ended``, ``refused`` or ``accepted`` (still ending); for either
    ``busy`` (the run took no more requests just now: try again)."""

    state: str
    id: str | None = None
    #: How a delivered steer reached the agent: ``resume`` or ``live``.
    how: str | None = None
    why: str | None = None
    #: The attempt that carries a delivered steer.
    attempt: int | None = None
    #: A run that ended after an abort: its outcome.
    outcome: str | None = None

    @classmethod
    def of(cls, data: dict[str, Any]) -> Receipt:
        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        attempt = data.get("attempt")
        return cls(
            state=text("state") or "refused",
            id=text("id"),
            how=text("how"),
            why=text("why") or text("error"),
            attempt=attempt if isinstance(attempt, int) else None,
            outcome=text("outcome"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "id": self.id,
            "how": self.how,
            "why": self.why,
            "attempt": self.attempt,
            "outcome": self.outcome,
        }


def steer(run_dir: Path, text: str, when: str = "now", wait: float = DEFAULT_WAIT) -> Receipt:
    """Send a steer to the run in ``run_dir`` and wait up to ``wait`` seconds
    for it to settle. Raises ``NotARun`` when ``run_dir`` holds no run,
    ``TooLong`` for a text over ``STEER_MAX_BYTES``."""
    check_size(text)
    return _last(_exchange(run_dir, {"op": "steer", "text": text, "when": when}, wait))


def abort(run_dir: Path, reason: str | None = None, wait: float = DEFAULT_WAIT) -> Receipt:
    """Abort the run in ``run_dir`` and wait up to ``wait`` seconds for it to end."""
    return _last(_exchange(run_dir, {"op": "abort", "reason": reason}, wait))


def _last(receipts: Iterator[Receipt]) -> Receipt:
    last = Receipt("refused", why="the run said nothing")
    for last in receipts:  # noqa: B007 - the last one is the answer
        pass
    return last


def _exchange(run_dir: Path, request: dict[str, Any], wait: float) -> Iterator[Receipt]:
    """The receipts for ``request``, as they come, until the run settles it,
    closes the connection, or ``wait`` ends."""
    path, refused = _socket_of(run_dir, str(request.get("op")))
    if refused is not None:
        yield Receipt("refused", why=refused)
        return
    deadline = time.monotonic() + wait
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(ACK_TIMEOUT)
        try:
            _connect(sock, path, time.monotonic() + ACK_TIMEOUT)
            sock.sendall(dumps(request) + b"\n")
        except (ConnectionRefusedError, FileNotFoundError):
            yield Receipt("refused", why=_not_answering(run_dir))
            return
        except TimeoutError:
            # Its queue of connections stayed full: it is running, but busy.
            yield Receipt(
                "busy", why=f"the run did not take the request within {ACK_TIMEOUT:g}s; try again"
            )
            return
        except (BrokenPipeError, ConnectionResetError) as exc:
            # The run answered before the request was read (it is busy) and
            # closed: its answer is still there to read.
            answer = _answer_left(sock)
            if answer is None:
                why = f"cannot reach the run's socket {path}: {exc.strerror}"
                answer = Receipt("refused", why=why)
            yield answer
            return
        except OSError as exc:
            yield Receipt("refused", why=f"cannot reach the run's socket {path}: {exc.strerror}")
            return
        buffer, answered = b"", False
        while True:
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                receipt = _parse(line)
                answered = True
                yield receipt
                if receipt.state not in ("queued", "sent", "accepted"):
                    return
            # The run's first answer (queued, accepted) is waited for whatever
            # the wait: it says the request was taken.
            left = deadline - time.monotonic() if answered else ACK_TIMEOUT
            if left <= 0:
                return
            sock.settimeout(left)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                return
            except OSError:
                data = b""
            if not data:
                return
            buffer += data
            if len(buffer) > RECEIPT_MAX_BYTES:
                yield Receipt("refused", why="the run's answer was not a receipt")
                return


def _answer_left(sock: socket.socket) -> Receipt | None:
    """The run's one answer, already sent, to a request it did not read."""
    data = b""
    with contextlib.suppress(OSError):
        sock.settimeout(ACK_TIMEOUT)
        while b"\n" not in data and len(data) <= RECEIPT_MAX_BYTES:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    if b"\n" not in data:
        return None
    return _parse(data.split(b"\n", 1)[0])


def _connect(sock: socket.socket, path: str, deadline: float) -> None:
    """Connect, trying again while the run's queue of connections is full
    (many clients at once), until ``deadline``."""
    while True:
        try:
            sock.connect(path)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError from None
            time.sleep(0.05)


def _parse(line: bytes) -> Receipt:
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        return Receipt("refused", why="the run's answer was not a receipt")
    return Receipt.of(data)


def _socket_of(run_dir: Path, op: str) -> tuple[str, str | None]:
    """The run's socket, or why the run takes no request."""
    status = mailbox.read_json(run_dir / "status.json", lambda message: None)
    if status is None:
        queued = batch_mark.queued_line(run_dir)
        if queued is not None:
            return "", _not_started(queued, op)
        if not run_dir.is_dir():
            raise NotARun(f"{run_dir} is not a directory: give a run's directory")
        raise NotARun(f"{run_dir} holds no agent-wrapper run (no readable status.json)")
    if status.get("state") == "finished":
        return "", f"the run has ended (outcome {status.get('outcome')})"
    unavailable = status.get("controlUnavailable")
    if isinstance(unavailable, str) and unavailable:
        # The run goes on; it could make no socket to take requests on.
        return "", unavailable
    path = status.get("control")
    if not isinstance(path, str) or not path:
        if status.get("state") == "starting":
            return "", "the run is starting and takes no request yet; try again in a moment"
        path = str(run_dir / SOCKET_NAME)
    problem = control_socket.check_socket(path)
    if problem is not None:
        return "", f"{_not_answering(run_dir)} ({problem})"
    return path, None


def _not_started(queued: batch_mark.QueuedLine, op: str) -> str:
    line = f"line {queued.line}" + (f" ({queued.label})" if queued.label else "")
    later = "steer it once it has started" if op == "steer" else "abort it once it has started"
    return (
        f"{line} of the batch running in {queued.runs_dir} has not started yet (its run "
        f"directory is made when it starts): {later}, or stop the whole batch with "
        f"`kill -TERM {queued.pid}` (runs going on end aborted, lines not started end "
        "aborted at once)"
    )


def _not_answering(run_dir: Path) -> str:
    status = mailbox.read_json(run_dir / "status.json", lambda message: None) or {}
    if status.get("state") == "finished":
        return f"the run has ended (outcome {status.get('outcome')})"
    return "the run is not answering: it has just ended, or its wrapper was killed"


# -- the command line ------------------------------------------------------------


def steer_main(run_dir: str, text: str, when: str, wait: float, as_json: bool) -> int:
    """``agent-wrapper steer RUN_DIR (--text TEXT | --file PATH) [--when] [--wait]``."""
    if not text.strip():
        return _fail("steer", "the text is empty: say what the agent should do instead", 2)
    try:
        receipt = steer(Path(run_dir), text, when, wait)
    except (NotARun, TooLong) as exc:
        return _fail("steer", str(exc), 2)
    if as_json:
        print(dumps(receipt.to_json()).decode())
    if receipt.state == "delivered":
        if not as_json:
            how = delivered_how(receipt.how)
            print(f"delivered steer {receipt.id} {how} (attempt {receipt.attempt})")
        return 0
    if receipt.state == "sent":
        if not as_json:
            print(
                f"steer {receipt.id} sent, not yet acknowledged: it is on the agent's input "
                f"(attempt {receipt.attempt}); result.json's externalSteers says what became of it"
            )
        return 0
    if receipt.state == "queued":
        if not as_json:
            print(
                f"steer {receipt.id} is queued: not delivered within {wait:g}s "
                "(it stays queued; see status.json's pendingSteers)"
            )
        return EXIT_STILL_WAITING
    if receipt.state == "busy":
        return _fail("steer", f"busy: {receipt.why}", EXIT_BUSY, quiet=as_json)
    return _fail("steer", f"refused: {receipt.why}", 1, quiet=as_json)


def abort_main(run_dir: str, reason: str | None, wait: float, as_json: bool) -> int:
    """``agent-wrapper abort RUN_DIR [--reason TEXT] [--wait SECONDS]``."""
    try:
        receipt = abort(Path(run_dir), reason, wait)
    except NotARun as exc:
        return _fail("abort", str(exc), 2)
    if as_json:
        print(dumps(receipt.to_json()).decode())
    if receipt.state == "ended":
        if not as_json:
            print(f"the run ended (outcome {receipt.outcome})")
        return 0
    if receipt.state == "accepted":
        if not as_json:
            print(f"the run is aborting; it had not ended within {wait:g}s")
        return EXIT_STILL_WAITING
    if receipt.state == "busy":
        return _fail("abort", f"busy: {receipt.why}", EXIT_BUSY, quiet=as_json)
    return _fail("abort", f"refused: {receipt.why}", 1, quiet=as_json)


def read_text_file(path: str) -> str:
    """A steer's text from a file (``-``: stdin), as UTF-8; raises
    ``TooLong`` past ``STEER_MAX_BYTES``, reading no more than one byte over."""
    if path == "-":
        data = sys.stdin.buffer.read(STEER_MAX_BYTES + 1)
    else:
        with open(path, "rb") as file:
            data = file.read(STEER_MAX_BYTES + 1)
    if len(data) > STEER_MAX_BYTES:
        raise TooLong(
            f"{path} holds more than the {STEER_MAX_BYTES} bytes a steer may hold; "
            "put the text in a file the agent can read and steer it there"
        )
    return data.decode("utf-8")


def fail_usage(command: str, message: str) -> int:
    return _fail(command, message, 2)


def _fail(command: str, message: str, status: int, *, quiet: bool = False) -> int:
    if not quiet:
        print(f"{PROG} {command}: {message}", file=sys.stderr)
    return status
