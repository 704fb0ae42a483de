"""Scheduler core: a pure library turning a Kalypso control plane into platform GitOps output."""
