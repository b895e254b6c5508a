"""Benchmark scenarios: each module measures one job of mtkit (and its peers) through benchmarks/harness.py."""
