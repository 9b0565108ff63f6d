"""Example data sets and generators used by benchmarks and tests."""
