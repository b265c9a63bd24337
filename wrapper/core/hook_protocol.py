"""The hook protocol, pure: what a handler is given and what its answer means.

It follows Claude Code's hooks: JSON on stdin; exit 0 with an optional JSON
object on stdout, exit 2 to block with stderr as the reason, any other exit
status a non-blocking failure. ``{"decision": "block", "reason": R}`` and the
wrapper's ``{"allow": false, "prompt": P}`` block; ``{"continue": false,
"stopReason": S}`` ends the run at once and wins over a block;
``extendMaxSteers: N`` raises the run's steer limit to N (never lowers it).

Everything that goes wrong fails open: a handler that crashes, times out,
prints malformed JSON or blocks without a reason allows the stop, and the
result carries a warning that says why.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

import orjson

#: A block reason becomes the agent's next prompt; it is cut to this length.
REASON_CHARS = 32_000
#: A judge's answer is looked for in this much of the end of its output...
VERDICT_SCAN_CHARS = 64_000
#: ...with at most this many parse attempts.
VERDICT_TRIES = 1000
#: How much of a failing handler's stderr a warning quotes.
STDERR_QUOTE_CHARS = 300

#: The built-in error retry: an answer that reads like a failure...
RETRY_ERROR_WORDS = re.compile(r"error|failed|cannot|unable|exception|traceback", re.IGNORECASE)
#: ...unless it also reads like a success.
RETRY_SUCCESS_WORDS = re.compile(r"successfully|completed|fixed|resolved", re.IGNORECASE)
#: What a prompt the wrapper sends is (``UserPromptSubmit``'s ``source``):
#: the run's task, a Stop hook's steer (the stop policies' and the error
#: retry's too), a steer or a follow-up from outside, a person's reply, a
#: person's reply that lets a run paused at its cap go on.
PROMPT_SOURCES = ("task", "stop_hook", "steer", "follow_up", "reply", "budget_resume")
RETRY_PROMPT = (
    "The previous approach hit an error. Try a different approach to accomplish the task."
)


class Decision(enum.StrEnum):
    ALLOW = "allow"
    BLOCK = "block"
    #: ``continue: false``: end the run now, no steering.
    END = "end"


@dataclass(frozen=True, slots=True, kw_only=True)
class HandlerResult:
    """What one hook handler's answer means for the run."""

    decision: Decision
    #: The block reason (the next prompt), or the stop message for ``END``.
    reason: str | None = None
    #: Why the handler's answer was not taken (it failed open).
    warning: str | None = None
    #: ``additionalContext`` for prompt events.
    context: str | None = None
    extend_max_steers: int | None = None
    exit_code: int | None = None
    #: A PreToolUse answer's ``permissionDecision`` (allow, deny, ask), if any.
    permission: str | None = None
    #: A PreToolUse answer's ``updatedInput``: the tool's input as the
    #: handler rewrote it (applied only where the agent can take it).
    updated_input: dict[str, Any] | None = None


ALLOW = HandlerResult(decision=Decision.ALLOW)


def looks_like_failure(text: str) -> bool:
    """The built-in error retry's test on the last assistant message."""
    return bool(RETRY_ERROR_WORDS.search(text)) and not RETRY_SUCCESS_WORDS.search(text)


def interpret_command(
    *, exit_code: int | None, stdout: bytes, stderr: bytes, plain_text_is_context: bool = False
) -> HandlerResult:
    """What a command handler's exit status and output mean."""
    if exit_code == 2:
        reason = _text(stderr)
        if not reason:
            return _failed_open("exited with status 2 (block) but gave no reason on stderr", 2)
        return HandlerResult(decision=Decision.BLOCK, reason=_clip(reason), exit_code=2)
    if exit_code != 0:
        how = f"was killed by signal {-exit_code}" if exit_code else "ended abnormally"
        if exit_code is not None and exit_code > 0:
            how = f"exited with status {exit_code}"
        quoted = _text(stderr)[-STDERR_QUOTE_CHARS:]
        return _failed_open(f"{how}{': ' + quoted if quoted else ''}", exit_code)
    text = _text(stdout)
    if not text:
        return HandlerResult(decision=Decision.ALLOW, exit_code=0)
    if not text.startswith("{"):
        context = text if plain_text_is_context else None
        return HandlerResult(decision=Decision.ALLOW, context=context, exit_code=0)
    try:
        answer = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return _failed_open(f"printed malformed JSON ({exc})", 0)
    if not isinstance(answer, dict):
        return _failed_open("printed JSON that is not an object", 0)
    return interpret_answer(answer, exit_code=0)


def interpret_answer(answer: dict[str, Any], *, exit_code: int | None = None) -> HandlerResult:
    """The meaning of a handler's JSON answer."""
    extend = answer.get("extendMaxSteers")
    if isinstance(extend, bool) or not isinstance(extend, int) or extend < 0:
        extend = None
    context = answer.get("additionalContext")
    specific = answer.get("hookSpecificOutput")
    if isinstance(specific, dict) and isinstance(specific.get("additionalContext"), str):
        context = specific["additionalContext"]
    common: dict[str, Any] = {
        "extend_max_steers": extend,
        "context": context if isinstance(context, str) and context else None,
        "exit_code": exit_code,
    }
    if answer.get("continue") is False:
        message = answer.get("stopReason")
        text = message if isinstance(message, str) and message else None
        return HandlerResult(decision=Decision.END, reason=text, **common)
    permission = specific.get("permissionDecision") if isinstance(specific, dict) else None
    new_input = specific.get("updatedInput") if isinstance(specific, dict) else None
    if isinstance(new_input, dict):
        common["updated_input"] = new_input
    if isinstance(specific, dict) and permission in ("allow", "deny", "ask"):
        why = specific.get("permissionDecisionReason")
        return HandlerResult(
            # A deny or an ask stops the chain of handlers as a block does.
            decision=Decision.ALLOW if permission == "allow" else Decision.BLOCK,
            reason=_clip(why.strip()) if isinstance(why, str) and why.strip() else None,
            permission=permission,
            **common,
        )
    blocks = answer.get("decision") == "block" or answer.get("allow") is False
    if not blocks:
        return HandlerResult(decision=Decision.ALLOW, **common)
    reason = answer.get("reason") if answer.get("decision") == "block" else answer.get("prompt")
    if not isinstance(reason, str) or not reason.strip():
        key = "reason" if answer.get("decision") == "block" else "prompt"
        return HandlerResult(
            decision=Decision.ALLOW,
            warning=f"blocked without a {key}; a block must say what the agent should do",
            **common,
        )
    return HandlerResult(decision=Decision.BLOCK, reason=_clip(reason.strip()), **common)


def interpret_verdict(text: str) -> HandlerResult:
    """A judge's answer (prompt and agent handlers): ``{"ok": bool, "reason": str}``
    (optionally ``"impossible": true``, which allows the stop) somewhere in its
    output, the last such object winning."""
    verdict = find_verdict(text)
    if verdict is None:
        return _failed_open('gave no {"ok": true|false, "reason": ...} answer', None)
    if verdict["ok"] is True or verdict.get("impossible") is True:
        # Claude's judges may also say the condition cannot be met: let it stop.
        return ALLOW
    reason = verdict.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        return _failed_open("answered ok: false without a reason", None)
    return HandlerResult(decision=Decision.BLOCK, reason=_clip(reason.strip()))


def find_verdict(text: str) -> dict[str, Any] | None:
    """The last JSON object with a boolean ``ok`` in ``text`` (a whole line,
    or embedded in prose or a code fence); only the end of a long text is
    searched, with a bounded number of tries."""
    text = text[-VERDICT_SCAN_CHARS:]
    tries = VERDICT_TRIES
    end = len(text)
    while tries > 0 and (close := text.rfind("}", 0, end)) >= 0:
        start = text.rfind("{", 0, close)
        while start >= 0 and tries > 0:
            tries -= 1
            try:
                value = orjson.loads(text[start : close + 1])
            except orjson.JSONDecodeError:
                start = text.rfind("{", 0, start)
                continue
            if isinstance(value, dict) and isinstance(value.get("ok"), bool):
                return value
            break
        end = close
    return None


def _failed_open(why: str, exit_code: int | None) -> HandlerResult:
    return HandlerResult(decision=Decision.ALLOW, warning=why, exit_code=exit_code)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace").strip()


def _clip(text: str) -> str:
    if len(text) <= REASON_CHARS:
        return text
    return text[:REASON_CHARS] + f"… [{len(text) - REASON_CHARS} more characters]"


def stop_failure_error(api_status: int | None, message: str) -> str:
    """Claude Code's name for why a turn failed (``StopFailure``'s ``error``),
    from the provider's HTTP status when the agent reported one."""
    if api_status == 429:
        return "rate_limit"
    if api_status in (401, 403):
        return "authentication_failed"
    if api_status == 402:
        return "billing_error"
    if api_status is not None and 400 <= api_status < 500:
        return "invalid_request"
    if api_status is not None and api_status >= 500:
        return "server_error"
    if "max_output_tokens" in message:
        return "max_output_tokens"
    return "unknown"


#: Terminal escape sequences (CSI, OSC and two-character ones), removed whole
#: so that no half of one is left as text.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
#: Control characters but newline and tab (C0, DEL, C1).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain_text(text: str) -> str:
    """``text`` without terminal escapes and control characters, newlines and
    tabs kept: what a tool printed for a terminal, made safe for a handler
    that logs it or shows it to a person."""
    if text.isprintable():
        return text
    return _CONTROLS.sub("", _ESCAPES.sub("", text))
