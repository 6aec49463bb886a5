"""Benchmarks: scripts that print figures; never run as tests."""
