"""The variables the wrapper sets in every process of a run, named once
(docs/events.md, "The agent's environment"): the agent, its hooks and everything
they start carry them, which is how a nested run, a ``signal`` from the
agent, and the guardian's cleanup find the run they belong to."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

#: The run's id: what marks a process as the run's.
RUN_ID = "AGENT_WRAPPER_RUN_ID"
#: The run's directory.
RUN_DIR = "AGENT_WRAPPER_RUN_DIR"
#: The attempt (1, 2, ... per steer; 0 while the stop hooks run).
ATTEMPT = "AGENT_WRAPPER_ATTEMPT"
#: How deeply runs are nested: 1 for a top-level run.
DEPTH = "AGENT_WRAPPER_DEPTH"
#: The id of the run a nested run was started from.
PARENT_RUN_ID = "AGENT_WRAPPER_PARENT_RUN_ID"
#: The wrapper's own command, one absolute path a shell can run: what the
#: agent runs to signal, which may not be on its PATH (a virtual environment).
BIN = "AGENT_WRAPPER_BIN"
#: The user's own values of the variables the run gives the agent beyond its
#: own (opencode's configuration naming the run's PreToolUse plugin), as a
#: JSON object (null: the user had none): what the hook relay, started by
#: the agent, restores for the handlers it runs.
USER_VALUES = "AGENT_WRAPPER_USER_ENV"


def user_values(agent_env: Mapping[str, str], base: Mapping[str, str]) -> str:
    """``USER_VALUES`` for an agent given ``agent_env`` over ``base`` (the user's)."""
    # The guardian's cleanup imports this module, and stays lean without orjson.
    import orjson  # noqa: PLC0415

    return orjson.dumps({name: base.get(name) for name in agent_env}).decode()


def without_agent_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` (an agent's) as the user had it, without what the run gave
    the agent alone: a hook handler must not carry it, or an agent a
    handler starts (a verifier, a nested run) would load the run's plugin
    and answer to this run's handlers."""
    import orjson  # noqa: PLC0415 - as above

    restored = dict(env)
    saved = restored.pop(USER_VALUES, None)
    try:
        values = orjson.loads(saved) if saved is not None else {}
    except orjson.JSONDecodeError:
        values = {}
    for name, value in values.items() if isinstance(values, dict) else ():
        if isinstance(value, str):
            restored[name] = value
        else:
            restored.pop(name, None)
    return restored
