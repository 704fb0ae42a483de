"""Grafana dashboards over the store's SQL views."""
