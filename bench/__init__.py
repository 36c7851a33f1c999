"""Benchmarks: project figures as ratios of raw baselines measured in the same run."""
