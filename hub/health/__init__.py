"""Liveness, readiness and metrics endpoints."""
