"""The wrapper's stop signals, listed once.

A run ends on the first of these that reaches the wrapper (outcome
``aborted``, exit 128 + its number); the guardian passes each on to the
worker, and the worker's early handlers record them until the run is up.
The guardian's waiter, which runs without the ``signal`` module, keeps the
same list as plain numbers; a test holds the two equal.
"""

from __future__ import annotations

import signal

#: SIGTERM, SIGINT, SIGHUP, SIGQUIT: what a runner, a terminal or a person
#: sends to end a process.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
#: The run's exit status as result.json reports it when the guardian was
#: killed: 128 + SIGKILL, the way a process dies without a word.
WRAPPER_KILLED_EXIT = 128 + signal.SIGKILL
