"""What a run writes out: its stream's files and live output (``stream``),
the live view (``pretty``) and the traces it exports (``telemetry``).

A run's traces are looked at here, without importing ``telemetry`` (nor
OpenTelemetry) unless the environment asks for them: the command line's
``run`` and ``batch`` share these, and a run loads nothing of ``batch``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wrapper.sinks.telemetry import RunTelemetry


def traced_runs(environ: dict[str, str]) -> bool:
    """Whether runs export traces (looked at without importing anything unless
    the environment names OpenTelemetry at all)."""
    if not any(name.startswith("OTEL_") for name in environ):
        return False
    from wrapper.sinks import telemetry  # noqa: PLC0415 - only when the environment names it

    return telemetry.enabled(environ)


def run_telemetry(environ: Mapping[str, str], **run: Any) -> RunTelemetry | None:
    """A run's telemetry (see ``wrapper.sinks.telemetry.for_run``), or None. A run
    that cannot export does not even import the module: only the standard
    environment (``OTEL_*``) or an exporter set through the module turns it on."""
    if "wrapper.sinks.telemetry" not in sys.modules and not any(
        name.startswith("OTEL_") for name in environ
    ):
        return None
    from wrapper.sinks import telemetry  # noqa: PLC0415

    return telemetry.for_run(environ, **run)


def flush_spans() -> None:
    """The runs' spans reach the collector, or it is given up on after the
    flush bound: the process ends with os._exit, which waits for nothing."""
    telemetry = sys.modules.get("wrapper.sinks.telemetry")
    if telemetry is not None:
        # Whoever set OTEL_* to get traces reads stderr, not result.json.
        for notice in (telemetry.unavailable(), telemetry.flush()):
            if notice is not None:
                with contextlib.suppress(OSError, ValueError):
                    print(f"agent-wrapper: warning: {notice}", file=sys.stderr, flush=True)
