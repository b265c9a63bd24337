"""The wrapper's version: in the core, so that any layer may name it (in a
run directory's marker, a protocol's client info, telemetry) without
importing the package's front door."""

from __future__ import annotations

#: Kept equal to ``[project] version`` in pyproject.toml.
VERSION = "0.1.0"
