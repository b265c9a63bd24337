"""The variables the wrapper sets in every process of a run, named once
(docs/events.md, "The agent's environment"): the agent, its hooks and everything
they start carry them, which is how a nested run, a ``signal`` from the
agent, and the guardian's cleanup find the run they belong to."""

from __future__ import annotations

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
