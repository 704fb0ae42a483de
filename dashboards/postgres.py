"""The query of Grafana's PostgreSQL datasource, as a grafana-foundation-sdk dataquery.

The SDK does not model this datasource, so `PostgresQuery` and the annotation query
`Annotation` are defined here once; `register()` lets `Dashboard.from_json` read them back
typed.
"""

import typing
from enum import StrEnum

from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import plugins as cogplugins
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models.dashboard import AnnotationQuery, DataSourceRef

__all__ = ["DATASOURCE_TYPE", "SQL", "Annotation", "Format", "PostgresQuery", "register"]

DATASOURCE_TYPE = "grafana-postgresql-datasource"


class Format(StrEnum):
    TABLE = "table"
    TIME_SERIES = "time_series"


class PostgresQuery(cogvariants.Dataquery):
    def __init__(
        self,
        raw_sql: str = "",
        format_val: Format = Format.TABLE,
        ref_id: str = "A",
        datasource: DataSourceRef | None = None,
        hide: bool | None = None,
    ) -> None:
        self.raw_sql = raw_sql
        self.format_val = format_val
        self.ref_id = ref_id
        self.datasource = datasource
        self.hide = hide

    def to_json(self) -> dict[str, object]:
        payload: dict[str, object] = {
            "refId": self.ref_id,
            "rawSql": self.raw_sql,
            "format": self.format_val.value,
            "rawQuery": True,
            "editorMode": "code",
        }
        if self.datasource is not None:
            payload["datasource"] = self.datasource
        if self.hide is not None:
            payload["hide"] = self.hide
        return payload

    @classmethod
    def from_json(cls, data: dict[str, typing.Any]) -> typing.Self:
        datasource = data.get("datasource")
        return cls(
            raw_sql=data.get("rawSql", ""),
            format_val=Format(data.get("format", Format.TABLE)),
            ref_id=data.get("refId", "A"),
            datasource=None if datasource is None else DataSourceRef.from_json(datasource),
            hide=data.get("hide"),
        )


class SQL(cogbuilder.Builder[cogvariants.Dataquery]):
    """A panel target: `SQL("SELECT ...").format(Format.TIME_SERIES)`."""

    def __init__(self, raw_sql: str) -> None:
        self._internal = PostgresQuery(raw_sql=raw_sql)

    def build(self) -> PostgresQuery:
        return self._internal

    def format(self, format_val: Format) -> typing.Self:
        self._internal.format_val = format_val
        return self

    def ref_id(self, ref_id: str) -> typing.Self:
        self._internal.ref_id = ref_id
        return self

    def datasource(self, datasource: DataSourceRef) -> typing.Self:
        self._internal.datasource = datasource
        return self


class _SqlAnnotation(AnnotationQuery):
    def __init__(self, name: str, query: PostgresQuery) -> None:
        super().__init__(name=name, enable=True, hide=False)
        self.query = query

    def to_json(self) -> dict[str, object]:
        return super().to_json() | {"target": self.query}


class Annotation(cogbuilder.Builder[AnnotationQuery]):
    """An annotation query: `Annotation("Rollouts", "SELECT ...").datasource(...)`."""

    def __init__(self, name: str, raw_sql: str) -> None:
        self._internal = _SqlAnnotation(name, PostgresQuery(raw_sql=raw_sql, ref_id="Anno"))

    def build(self) -> AnnotationQuery:
        return self._internal

    def datasource(self, datasource: DataSourceRef) -> typing.Self:
        self._internal.datasource = datasource
        return self

    def icon_color(self, icon_color: str) -> typing.Self:
        self._internal.icon_color = icon_color
        return self


def register() -> None:
    """The SDK's own plugins and this dataquery, in the SDK's runtime (idempotent)."""
    cogplugins.register_default_plugins()
    cogruntime.register_dataquery_variant(
        cogruntime.DataqueryConfig(
            identifier=DATASOURCE_TYPE, from_json_hook=PostgresQuery.from_json
        )
    )
