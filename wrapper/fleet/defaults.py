"""A batch's defaults: what ``agent-wrapper batch`` does unless told
otherwise. Standard library only: the command line reads them to build its
parser, before anything of a run is imported."""

from __future__ import annotations

import os
from pathlib import Path

#: How many runs of a batch go on at once, unless --jobs says otherwise: one
#: a CPU this process may use (an agent mostly waits on its model; its tools
#: then want a core each).
DEFAULT_JOBS = max(1, len(os.sched_getaffinity(0)))
#: Where a batch's runs go when --runs-dir is not given, relative to the
#: working directory (then ``batch-BATCH_ID`` below it).
DEFAULT_BATCHES_ROOT = Path(".agent-wrapper") / "batches"
