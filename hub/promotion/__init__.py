"""Promotion gate answers kept in the store for the newest commits and versions of each
environment, for the dashboards and alert rules that cannot run the gate's Python policy."""
