"""The conformance tier is collected only when scripts/conformance (or a
person) points ``AGENT_WRAPPER_CLIS`` at installed CLIs, so that the suite's
own command never downloads or runs a real agent."""

from __future__ import annotations

import os

collect_ignore = (
    []
    if os.environ.get("AGENT_WRAPPER_CLIS")
    else [
        "test_conformance.py",
        "test_conformance_acp.py",
        "test_conformance_hooks.py",
        "test_conformance_steer.py",
        "test_conformance_live.py",
        "test_conformance_cost.py",
        "test_conformance_mcp.py",
    ]
)
