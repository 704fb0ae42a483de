"""What every answer of the client shares: fields a newer hub adds are kept, and an answer that
lists rows turns into a pandas DataFrame, a row each (`to_dataframe()`, fleetmark[pandas])."""

from collections.abc import Iterator, Sequence
from enum import Enum
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, RootModel

if TYPE_CHECKING:
    from pandas import DataFrame

Row = TypeVar("Row", bound=BaseModel)


class Answer(BaseModel):
    """A document the hub answered. Fields this client does not know (a newer hub's) are kept,
    so `--output json` prints the document as it came."""

    model_config = ConfigDict(extra="allow")


class Listing(Answer):
    """An answer that lists rows (`items`, unless `rows` names another field)."""

    rows: ClassVar[str] = "items"

    def to_dataframe(self) -> "DataFrame":
        """A row per listed item; a nested object's fields as columns of their own
        (`object.kind`), lists and maps as they are. Needs pandas (fleetmark[pandas])."""
        annotation = type(self).model_fields[self.rows].annotation
        [row_type] = get_args(annotation)
        rows: Sequence[BaseModel] = getattr(self, self.rows)
        return frame(rows, row_type)


class ItemList(RootModel[list[Row]], Generic[Row]):
    """An answer that is a list: iterate it, index it, or make it a DataFrame."""

    def __iter__(self) -> Iterator[Row]:  # type: ignore[override]
        return iter(self.root)

    def __len__(self) -> int:
        return len(self.root)

    def __getitem__(self, index: int) -> Row:
        return self.root[index]

    def to_dataframe(self) -> "DataFrame":
        """A row per item, as `Listing.to_dataframe` makes them."""
        annotation = type(self).model_fields["root"].annotation
        [row_type] = get_args(annotation)
        return frame(self.root, row_type)


def frame(rows: Sequence[BaseModel], row_type: type[BaseModel]) -> "DataFrame":
    """`rows` as a DataFrame with a column per field of `row_type`, nested models flattened."""
    try:
        import pandas
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"to_dataframe() needs pandas ({exc}): pip install 'fleetmark[pandas]'", name=exc.name
        ) from exc
    return pandas.DataFrame.from_records(
        [dict(_flat(row, row_type)) for row in rows], columns=list(_columns(row_type))
    )


def _nested(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, itself or optionally (`Source | None`); None for other types."""
    if get_origin(annotation) in (Union, UnionType):
        kinds = [kind for kind in get_args(annotation) if kind is not NoneType]
        annotation = kinds[0] if len(kinds) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _columns(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for name, field in model.model_fields.items():
        nested = _nested(field.annotation)
        if nested is None:
            yield prefix + name
        else:
            yield from _columns(nested, f"{prefix}{name}.")


def _flat(
    row: BaseModel | None, model: type[BaseModel], prefix: str = ""
) -> Iterator[tuple[str, object]]:
    for name, field in model.model_fields.items():
        value = None if row is None else getattr(row, name)
        nested = _nested(field.annotation)
        if nested is None:
            yield prefix + name, _plain(value)
        else:
            yield from _flat(value, nested, f"{prefix}{name}.")


def _plain(value: object) -> object:
    """A cell: enums as their values, models inside lists and maps as dicts."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    return value
