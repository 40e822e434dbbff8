"""Benchmarks: time and memory of the module, as ratios measured in one run (docs/performance.md)."""
