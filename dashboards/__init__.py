"""Grafana dashboards as code, over the views of the schema `grafana` (migration 0023).

- `dashboards.postgres`: the query of Grafana's PostgreSQL datasource as an SDK dataquery
  (`PostgresQuery`, built with `SQL(...)`), and `register()`, which adds it to the SDK's
  runtime so that `Dashboard.from_json` reads it back typed;
- `dashboards.common`: what every dashboard shares: `DATASOURCE`, the variables
  (`VARIABLES`, `variables()`), the filters they make (`scope(alias)`, `chosen(variable,
  column)`, `shown_clusters()`, `stale(column)`), the order of a table that can be cut
  (`severity(alias)`, `latest_first(alias)`), `dashboard(uid, title, description)` and the
  panels (`table`, `stat`, `timeseries`, `state_timeline`, `link_clusters`, `freshness`), and
  `dashboard_url(uid)` for links that carry the variables and time range over;
- one module per dashboard (`fleet`, `drift`, `envdiff`, `history`, `dora`, `promotion`,
  `cluster`), each with `UID`, `TITLE` and `build()`;
- `dashboards.build`: `DASHBOARDS`, the list of those modules, and the files they make
  (`render()`, `write()`, `check()`), behind `python -m dashboards build|check`.
"""
