"""Runs as OpenTelemetry traces, for whoever already collects them.

With the optional extra installed (``pip install '.[otel]'`` in a checkout) and
the standard environment asking for export (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or ``OTEL_TRACES_EXPORTER`` other than
``none``; ``OTEL_SDK_DISABLED=true`` wins), each run is one trace:

    invoke_agent AGENT                  the run
      attempt N                         one per attempt (a steer starts the next)
        execute_tool TOOL               one per tool call the agent announced
        hook EVENT                      one per hook handler run at that point

The spans follow the GenAI semantic conventions of ``SEMCONV_VERSION`` (still
experimental upstream, hence the pin); what the conventions have no name for
is under ``agent_wrapper.``. No text is exported: not the task, not the
agent's messages, not tool arguments or results, not hook reasons.

This module imports nothing of OpenTelemetry until a run wants the export,
so a run without it costs one look at the environment. Nothing here raises
into a run: a failure of the telemetry is one warning and no more spans.

Nothing here writes on stderr either: the wrapper may be a guest in its
caller's process (the Python API), whose stderr is not its to use. What a
run should know goes into its warnings; what only the process can know
(spans lost at the last flush) is returned to the process's owner, and the
SDK's own messages go to ``logging`` alone.

One module, though long: the whole mapping of a run onto spans (names,
attributes, ids, export and flush) is one concept, and keeping it apart is
what lets a run without the export import nothing of it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from wrapper.core.cost import run_cost
from wrapper.core.events import (
    AssistantMessage,
    Event,
    Exited,
    HookDecision,
    HookStarted,
    SessionStarted,
    Steer,
    ToolEnded,
    ToolStarted,
)
from wrapper.core.limits import FLUSH_TIMEOUT
from wrapper.sinks.trace_ids import PlannedIds

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

#: The version of the OpenTelemetry semantic conventions the spans follow.
SEMCONV_VERSION = "1.39.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
FLUSH_TIMEOUT_VARIABLE = "AGENT_WRAPPER_OTEL_FLUSH_TIMEOUT"
#: The package is on no index: it is installed from its checkout.
INSTALL_HINT = "pip install '.[otel]' in the agent-wrapper checkout (or scripts/setup --dev)"
GRPC_HINT = "pip install opentelemetry-exporter-otlp-proto-grpc (for OTEL_*_PROTOCOL=grpc)"

#: The provider each dialect's agent talks to, where one is implied
#: (``gen_ai.provider.name``'s well-known values).
PROVIDERS = {"claude": "anthropic", "codex": "openai", "gemini": "gcp.gemini"}

_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def export_wanted(environ: Mapping[str, str]) -> bool:
    """Whether the standard OpenTelemetry environment asks for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return any(environ.get(name, "").strip() for name in _ENDPOINT_VARIABLES)


def flush_timeout(environ: Mapping[str, str]) -> float:
    try:
        value = float(environ.get(FLUSH_TIMEOUT_VARIABLE, FLUSH_TIMEOUT))
    except ValueError:
        return FLUSH_TIMEOUT
    return value if value >= 0 else FLUSH_TIMEOUT


# -- the process's provider ----------------------------------------------------------

#: Set by tests (or an embedding program) to receive the spans in-process.
_exporter_override: SpanExporter | None = None
_provider: TracerProvider | None = None
_tracer: Tracer | None = None
#: The ids the next span must have (planned ones), else random.
_next_trace_ids: list[int] = []
_next_span_ids: list[int] = []


def use_exporter(exporter: SpanExporter | None) -> None:
    """Send every run's spans to ``exporter`` (synchronously, as each ends),
    whatever the environment says; None goes back to the environment."""
    global _exporter_override, _provider, _tracer
    _exporter_override = exporter
    _provider = _tracer = None


def enabled(environ: Mapping[str, str]) -> bool:
    return _exporter_override is not None or export_wanted(environ)


def _get_tracer(environ: Mapping[str, str]) -> Tracer:
    """The process's tracer, its provider made on first use. Raises
    ImportError when the extra is not installed."""
    global _provider, _tracer
    if _tracer is not None:
        return _tracer
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class PlannedIdGenerator(RandomIdGenerator):
        def generate_span_id(self) -> int:
            return _next_span_ids.pop(0) if _next_span_ids else super().generate_span_id()

        def generate_trace_id(self) -> int:
            return _next_trace_ids.pop(0) if _next_trace_ids else super().generate_trace_id()

    from wrapper.core.version import VERSION

    # With no logging configured, Python's last-resort handler would print
    # the SDK's complaints (a collector down, a request timed out) on the
    # host's stderr; a host that configures logging still gets them, and
    # the wrapper reports lost spans itself.
    _SDK_LOGGER.addHandler(_SILENT)
    # Our name is only a default: the user's variables (the API's ``env``
    # included) are how a fleet tells its services apart, and win.
    resource = Resource.create({"service.name": "agent-wrapper", "service.version": VERSION}).merge(
        Resource(resource_attributes(environ))
    )
    # Our own flush, bounded, replaces the SDK's unbounded one at exit.
    provider = TracerProvider(
        resource=resource, shutdown_on_exit=False, id_generator=PlannedIdGenerator()
    )
    if _exporter_override is not None:
        provider.add_span_processor(SimpleSpanProcessor(_exporter_override))
    else:
        exporter = _environment_exporter(environ)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(_counting(exporter)))
    _provider = provider
    _tracer = provider.get_tracer("agent-wrapper", VERSION, schema_url=SCHEMA_URL)
    return _tracer


def resource_attributes(environ: Mapping[str, str]) -> dict[str, str]:
    """What ``OTEL_RESOURCE_ATTRIBUTES`` (``k=v,...``, percent-decoded) and then
    ``OTEL_SERVICE_NAME`` set, read as the SDK reads them."""
    from urllib.parse import unquote

    attributes: dict[str, str] = {}
    for item in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, equals, value = item.partition("=")
        if equals and key.strip():
            attributes[key.strip()] = unquote(value.strip())
    service = environ.get("OTEL_SERVICE_NAME", "").strip()
    return {**attributes, "service.name": service} if service else attributes


def _environment_exporter(environ: Mapping[str, str]) -> SpanExporter | None:
    kind = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)
    if kind != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER={kind} is not supported (otlp, console, none)")
    protocol = environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    ).strip()
    # The run's environment, not only the process's, says where to (the
    # Python API's ``env``); the SDK reads the other variables itself.
    traces_endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
            OTLPSpanExporter as GrpcExporter,
        )

        exporter: SpanExporter = GrpcExporter(
            endpoint=traces_endpoint or endpoint or None, timeout=flush_timeout(environ)
        )
        return exporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if not traces_endpoint and endpoint:
        traces_endpoint = endpoint.rstrip("/") + "/v1/traces"
    # One request may not outlast the flush bound either.
    return OTLPSpanExporter(endpoint=traces_endpoint or None, timeout=flush_timeout(environ))


#: The SDK's loggers (exporters, processors) all sit below this one.
_SDK_LOGGER = logging.getLogger("opentelemetry")
#: One handler, so that a second provider (``use_exporter``) adds no other.
_SILENT = logging.NullHandler()

#: How many spans the exporter failed to deliver (a collector down, refusing),
#: since the process started.
_undelivered = 0
#: How many of those ``flush`` has already reported.
_undelivered_reported = 0


def _counting(exporter: SpanExporter) -> SpanExporter:
    """``exporter``, counting in ``_undelivered`` the spans it could not deliver."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Counting(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            global _undelivered
            try:
                result = exporter.export(spans)
            except Exception:
                result = SpanExportResult.FAILURE
            if result is not SpanExportResult.SUCCESS:
                _undelivered += len(spans)
            return result

        def shutdown(self) -> None:
            exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return exporter.force_flush(timeout_millis)

    return Counting()


#: Why the export asked for cannot happen (no extra), until told ("" then).
_unavailable: str | None = None


def unavailable() -> str | None:
    """What the process's owner should say, once: traces were asked for
    without the extra (a run's own warning is only in its result.json)."""
    global _unavailable
    message, _unavailable = _unavailable, "" if _unavailable is not None else None
    return message or None


def flush(environ: Mapping[str, str] | None = None) -> str | None:
    """Hand the spans of the runs so far to the collector, waiting at most the
    flush bound (``AGENT_WRAPPER_OTEL_FLUSH_TIMEOUT``, default 2 s). Returns
    what a person should be told when spans were lost (once for each loss),
    else None; the caller decides where that goes. A no-op when no run
    exported anything."""
    global _undelivered_reported
    if _provider is None:
        return None
    timeout = flush_timeout(os.environ if environ is None else environ)
    try:
        done = _provider.force_flush(timeout_millis=int(timeout * 1000))
    except Exception:
        done = False
    if done and _undelivered == _undelivered_reported:
        return None
    _undelivered_reported = _undelivered
    return (
        "OpenTelemetry: the collector did not take the runs' spans within "
        f"{timeout:g} s ({FLUSH_TIMEOUT_VARIABLE}); they are dropped"
    )


# -- one run -------------------------------------------------------------------------


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def for_run(
    environ: Mapping[str, str],
    *,
    run_id: str,
    agent: str | None,
    started_at: float,
    warn: Callable[[str], None],
    trace_of_its_own: bool = False,
    planned: PlannedIds | None = None,
) -> RunTelemetry | None:
    """The run's telemetry, or None when it exports nothing. ``warn`` is
    told, once, why a run that asked for the export does not get it.
    ``trace_of_its_own``: a caller's ``TRACEPARENT`` becomes a link, not the
    parent (a batch's runs are a trace each). ``planned``: the ids its run
    span and first attempt span get (``trace_ids.plan_ids``)."""
    global _unavailable
    if not enabled(environ):
        return None
    try:
        tracer = _get_tracer(environ)
    except ImportError as exc:
        # The extra has no grpc exporter: installing it again would not help.
        hint = GRPC_HINT if "grpc" in (exc.name or "") else INSTALL_HINT
        message = (
            "the environment asks for OpenTelemetry traces (OTEL_*), but the optional "
            f"packages are not installed: {hint}; the run goes on without"
        )
        warn(message)
        _unavailable = message if _unavailable is None else _unavailable
        return None
    except Exception as exc:
        warn(f"OpenTelemetry export could not be set up ({exc}); the run goes on without")
        return None
    try:
        return RunTelemetry(
            tracer,
            environ,
            run_id=run_id,
            agent=agent,
            started_at=started_at,
            warn=warn,
            trace_of_its_own=trace_of_its_own,
            planned=planned,
        )
    except Exception as exc:
        warn(f"OpenTelemetry: the run's span could not be started ({exc})")
        return None


class RunTelemetry:
    """The spans of one run, fed the run's normalized events."""

    def __init__(
        self,
        tracer: Tracer,
        environ: Mapping[str, str],
        *,
        run_id: str,
        agent: str | None,
        started_at: float,
        warn: Callable[[str], None],
        trace_of_its_own: bool,
        planned: PlannedIds | None = None,
    ) -> None:
        from opentelemetry import trace
        from opentelemetry.context import Context
        from opentelemetry.trace import Link, SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._trace = trace
        self._tracer = tracer
        self._warn = warn
        self._failed = False
        self._undelivered_before = _undelivered
        self._propagator = TraceContextTextMapPropagator()
        carrier = {}
        if environ.get("TRACEPARENT"):
            carrier["traceparent"] = environ["TRACEPARENT"]
            if environ.get("TRACESTATE"):
                carrier["tracestate"] = environ["TRACESTATE"]
        caller = self._propagator.extract(carrier, context=Context())
        caller_span = trace.get_current_span(caller).get_span_context()
        links = []
        if trace_of_its_own:
            if caller_span.is_valid:
                links.append(Link(caller_span))
            caller = Context()
        name = agent or "agent"
        self._planned = planned
        if planned is not None:
            _next_trace_ids[:] = [planned.trace_id]
            _next_span_ids[:] = [planned.run_span_id]
        self.run_span: Span = tracer.start_span(
            f"invoke_agent {name}",
            context=caller,
            kind=SpanKind.INTERNAL,
            start_time=_ns(started_at),
            links=links,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
                "agent_wrapper.run_id": run_id,
            },
        )
        _next_trace_ids.clear()
        _next_span_ids.clear()
        provider = PROVIDERS.get(name)
        if provider is not None:
            self.run_span.set_attribute("gen_ai.provider.name", provider)
        self._attempt: Span | None = None
        #: The attempt that ended last: hooks at its stop are its children.
        self._ended_attempt: Span | None = None
        self._attempt_number = 0
        self._usage: dict[str, int] = {}
        self._finish_reasons: list[str] = []
        self._tools: dict[str, list[Span]] = {}
        self._hooks: dict[tuple[str, str], list[Span]] = {}

    def warn_undelivered(self) -> None:
        """Warn the run, before its result is written, when the collector
        already failed to take spans exported while it went on (another
        run's included: what matters is that the collector is not taking them)."""
        lost = _undelivered - self._undelivered_before
        if lost:
            self._warn(
                f"OpenTelemetry: the collector did not take {lost} span(s) while the "
                "run went on; they are dropped"
            )

    def _fail(self, exc: Exception) -> None:
        if not self._failed:
            self._failed = True
            self._warn(f"OpenTelemetry: spans of this run are incomplete ({exc!r})")

    def _context(self, span: Span | None) -> Any:
        return self._trace.set_span_in_context(span or self.run_span)

    def attempt_env(self, number: int, now: float) -> dict[str, str]:
        """Open attempt ``number``'s span; returns what the agent's environment
        gets so that its own spans join the run's trace (``TRACEPARENT``, and
        ``TRACESTATE`` when there is one)."""
        try:
            self._end_attempt(now)
            self._attempt_number = number
            self._usage, self._finish_reasons = {}, []
            if number == 1 and self._planned is not None:
                _next_span_ids[:] = [self._planned.attempt_span_id]
            self._attempt = self._tracer.start_span(
                f"attempt {number}",
                context=self._context(None),
                start_time=_ns(now),
                attributes={"agent_wrapper.attempt": number},
            )
            _next_span_ids.clear()
            return self.context_env()
        except Exception as exc:
            self._fail(exc)
            return {}

    def context_env(self) -> dict[str, str]:
        """``TRACEPARENT`` (and ``TRACESTATE``) naming the attempt's span, or
        the run's before the first attempt."""
        carrier: dict[str, str] = {}
        try:
            self._propagator.inject(carrier, context=self._context(self._attempt))
        except Exception as exc:
            self._fail(exc)
        return {key.upper(): value for key, value in carrier.items()}

    def _end_attempt(self, now: float, exit_code: int | None = None) -> None:
        span, self._attempt = self._attempt, None
        if span is None:
            return
        for spans in self._tools.values():
            for tool in spans:
                tool.set_attribute("agent_wrapper.tool.unfinished", True)
                tool.end(_ns(now))
        self._tools.clear()
        for key, value in self._usage.items():
            span.set_attribute(key, value)
        if self._finish_reasons:
            span.set_attribute("gen_ai.response.finish_reasons", self._finish_reasons)
        span.end(_ns(now))

    def observe(self, event: Event, now: float, attempt: int) -> None:
        """One of the run's events (every one but text deltas), stamped ``now``."""
        if self._failed:
            return
        try:
            self._observe(event, now)
        except Exception as exc:
            self._fail(exc)

    def _observe(self, event: Event, now: float) -> None:
        if isinstance(event, ToolStarted):
            span = self._tracer.start_span(
                f"execute_tool {event.tool}",
                context=self._context(self._attempt),
                start_time=_ns(now),
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event.tool,
                },
            )
            if event.tool_call_id:
                span.set_attribute("gen_ai.tool.call.id", event.tool_call_id)
            self._tools.setdefault(event.tool_call_id or event.tool, []).append(span)
        elif isinstance(event, ToolEnded):
            spans = self._tools.get(event.tool_call_id or event.tool)
            if spans:
                span = spans.pop(0)
                if event.is_error:
                    span.set_attribute("error.type", "tool_error")
                    span.set_status(self._trace.StatusCode.ERROR)
                span.end(_ns(now))
        elif isinstance(event, HookStarted):
            span = self._tracer.start_span(
                f"hook {event.event}",
                context=self._context(self._attempt_or_last()),
                start_time=_ns(now),
                attributes={
                    "agent_wrapper.hook.event": event.event,
                    "agent_wrapper.hook.handler": event.handler,
                },
            )
            self._hooks.setdefault((event.event, event.handler), []).append(span)
        elif isinstance(event, HookDecision):
            self._hook_decided(event, now)
        elif isinstance(event, AssistantMessage):
            self._message(event)
        elif isinstance(event, SessionStarted):
            if event.session_id:
                self.run_span.set_attribute("gen_ai.conversation.id", event.session_id)
        elif isinstance(event, Steer):
            self.run_span.add_event(
                "agent_wrapper.steer",
                {"agent_wrapper.next_attempt": event.next_attempt},
                timestamp=_ns(now),
            )
        elif isinstance(event, Exited) and self._attempt is not None:
            if event.exit_code is not None:
                self._attempt.set_attribute("agent_wrapper.exit_code", event.exit_code)
            if event.exit_signal is not None:
                self._attempt.set_attribute("agent_wrapper.exit_signal", event.exit_signal)
            self._ended_attempt = self._attempt
            self._end_attempt(now)

    def _attempt_or_last(self) -> Span | None:
        """Hooks at an attempt's stop are that attempt's, though it has ended."""
        return self._attempt or self._ended_attempt

    def _hook_decided(self, event: HookDecision, now: float) -> None:
        spans = self._hooks.get((event.event, event.handler))
        if spans:
            span = spans.pop(0)
        else:
            span = self._tracer.start_span(
                f"hook {event.event}",
                context=self._context(self._attempt_or_last()),
                start_time=_ns(now - event.duration_ms / 1000),
                attributes={
                    "agent_wrapper.hook.event": event.event,
                    "agent_wrapper.hook.handler": event.handler,
                },
            )
        span.set_attribute("agent_wrapper.hook.decision", event.decision)
        if event.exit_code is not None:
            span.set_attribute("agent_wrapper.hook.exit_code", event.exit_code)
        if event.warning is not None:
            span.set_attribute("error.type", "hook_failed")
            span.set_status(self._trace.StatusCode.ERROR)
        span.end(_ns(now))

    def _message(self, event: AssistantMessage) -> None:
        attempt = self._attempt
        if attempt is None:
            return
        if event.model:
            attempt.set_attribute("gen_ai.response.model", event.model)
        if event.stop_reason:
            self._finish_reasons.append(event.stop_reason)
        usage = event.usage
        if usage is None:
            return
        for key, value in (
            ("gen_ai.usage.input_tokens", usage.input),
            ("gen_ai.usage.output_tokens", usage.output),
            ("gen_ai.usage.cache_read.input_tokens", usage.cache_read),
            ("gen_ai.usage.cache_creation.input_tokens", usage.cache_write),
        ):
            if value is not None:
                self._usage[key] = self._usage.get(key, 0) + value

    def finish(self, result: Mapping[str, Any] | None, outcome: str, now: float) -> None:
        """The run ended with ``result`` (result.json as written; None when it
        was not): close what is open, describe the run, end its span."""
        try:
            self._finish(result or {}, outcome, now)
        except Exception as exc:
            self._fail(exc)
            with contextlib.suppress(Exception):
                self.run_span.end(_ns(now))

    def _finish(self, result: Mapping[str, Any], outcome: str, now: float) -> None:
        self._end_attempt(now)
        for spans in self._hooks.values():
            for span in spans:
                span.end(_ns(now))
        self._hooks.clear()
        span = self.run_span
        attributes: dict[str, Any] = {"agent_wrapper.outcome": outcome}
        dialect = result.get("dialect")
        if isinstance(dialect, str) and dialect:
            # An agent told apart by its output is known by name only now.
            span.update_name(f"invoke_agent {dialect}")
            attributes["gen_ai.agent.name"] = dialect
            if dialect in PROVIDERS:
                attributes["gen_ai.provider.name"] = PROVIDERS[dialect]
        if result.get("sessionId"):
            attributes["gen_ai.conversation.id"] = str(result["sessionId"])
        if result.get("model"):
            attributes["gen_ai.response.model"] = str(result["model"])
        if result.get("stopReason"):
            attributes["gen_ai.response.finish_reasons"] = [str(result["stopReason"])]
        if result.get("rawStopReason"):
            attributes["agent_wrapper.stop_reason.raw"] = str(result["rawStopReason"])
        usage = result.get("usage") or {}
        for key, field in (
            ("gen_ai.usage.input_tokens", "input"),
            ("gen_ai.usage.output_tokens", "output"),
            ("gen_ai.usage.cache_read.input_tokens", "cacheRead"),
            ("gen_ai.usage.cache_creation.input_tokens", "cacheWrite"),
            ("agent_wrapper.usage.cost_usd", "costUsd"),
        ):
            if usage.get(field) is not None:
                attributes[key] = usage[field]
        # What the run cost, for every agent (the agent's figure or the price
        # table's): an unknown cost has no figure, never 0, and its source says so.
        cost = run_cost(result)
        if cost.usd is not None:
            attributes["agent_wrapper.cost.usd"] = cost.usd
        attributes["agent_wrapper.cost.source"] = cost.source
        for key, field in (
            ("agent_wrapper.exit_status", "exitStatus"),
            ("agent_wrapper.steer_count", "steerCount"),
        ):
            if isinstance(result.get(field), int):
                attributes[key] = result[field]
        attributes["agent_wrapper.attempts"] = self._attempt_number
        error = result.get("error")
        if isinstance(error, Mapping) and error.get("kind"):
            attributes["error.type"] = str(error["kind"])
            span.set_status(self._trace.StatusCode.ERROR, str(error["kind"]))
        elif outcome != "ok":
            attributes["error.type"] = outcome
            span.set_status(self._trace.StatusCode.ERROR, outcome)
        span.set_attributes(attributes)
        span.end(_ns(now))
