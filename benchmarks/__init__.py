"""Benchmarks of agent-wrapper: throughput, memory, cleanup latency, start-up.

Run ``.venv/bin/python -m benchmarks`` (or ``benchmarks/run``) from the
repository root; ``--help`` lists the options. Every figure is measured side
by side with its reference in the same run and reported as a median over
``--repeat`` repetitions.
"""
