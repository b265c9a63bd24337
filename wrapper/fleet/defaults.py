"""A batch's defaults: what ``agent-wrapper batch`` does unless told
otherwise. Nothing of a run is imported: the command line reads them to
build its parser."""

from __future__ import annotations

import os

from wrapper.core.config import DEFAULT_BATCHES_ROOT

__all__ = ["DEFAULT_BATCHES_ROOT", "DEFAULT_JOBS"]

#: How many runs of a batch go on at once, unless --jobs says otherwise: one
#: a CPU this process may use (an agent mostly waits on its model; its tools
#: then want a core each).
DEFAULT_JOBS = max(1, len(os.sched_getaffinity(0)))
