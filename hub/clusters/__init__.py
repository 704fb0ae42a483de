"""Cluster registration, cluster tokens and the per-cluster view of current state."""
