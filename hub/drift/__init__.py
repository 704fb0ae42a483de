"""Drift: each object against the harvested head of what it follows, and drift history."""
