"""The JSON form of the core's result records: their dataclass fields, as they are.

A result the core hands to its faces (a recall page, a sync report) is a dataclass whose
``to_json`` is every field under its own name, in the order the class declares them. This
module holds that rule once (:func:`fields_json`), so a field added to such a record is in
its JSON without a second list to keep in step. Imports nothing of the package.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["fields_json"]


def fields_json(record: Any) -> dict[str, Any]:
    """``{field name: value}`` for every field of the dataclass instance ``record``, in
    declaration order. Shallow: the values are the record's own objects (lists and dicts
    are not copied, unlike :func:`dataclasses.asdict`). Raises TypeError when ``record``
    is not a dataclass instance."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        raise TypeError(f"fields_json takes a dataclass instance, not {type(record).__name__}")
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
