"""API tokens (admin, read or metrics scope) for people, scripts, CI pipelines and
Prometheus."""
