"""API tokens (admin or read scope) for people, scripts and CI pipelines."""
