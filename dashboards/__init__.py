"""Grafana dashboards as code, over the views of the schema `grafana` (migration 0023).

One module per dashboard, what they share in `dashboards.common`, the files they make in
`dashboards.build` (behind `python -m dashboards build|check`); docs/contributing.md
("Dashboards as code") shows how they fit.
"""
