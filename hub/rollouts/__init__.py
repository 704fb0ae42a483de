"""Rollouts: each platform commit or workload version moving through an environment, and
whether it is in progress, converged, failed or stalled, kept for every reader."""
