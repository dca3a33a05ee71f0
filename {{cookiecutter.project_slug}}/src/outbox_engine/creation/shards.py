"""Scopes and categories (Sentry-style shards) for outbox items.

A *scope* is the unit of ordering and isolation (an organization, a user, an audit log);
its *shard identifier* becomes the item's partition key, so one shard's items are delivered
in order. A *category* is a kind of event, registered to exactly one scope; it names the
item's event and may opt in to *coalescing*: of several pending items with the same
(scope, shard identifier, category, object identifier) only the newest is delivered.

    shards = ShardRegistry()
    ORGANIZATION = shards.scope("organization", 0, shard_attributes=("organization_id", "id"))
    ORGANIZATION_UPDATE = shards.category("organization_update", 10, ORGANIZATION, coalesce=True)

Values are stored with each item and must never change meaning: a retired category keeps
its value reserved (`shards.retire(11, "old_name")`) so old items are never misread.
Registration errors are raised at import time, with the name and value that clash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ShardError(ValueError):
    """An invalid scope or category declaration, or an identifier that cannot be inferred."""


@dataclass(frozen=True)
class Scope:
    name: str
    value: int
    # Attributes tried in order to infer a model instance's shard identifier.
    shard_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Category:
    name: str
    value: int
    scope: Scope
    coalesce: bool = False


# Header names under which an item carries its shard coordinates.
SCOPE_HEADER = "scope"
CATEGORY_HEADER = "category"
OBJECT_HEADER = "object-id"
COALESCE_HEADER = "coalesce"


@dataclass
class ShardRegistry:
    scopes: dict[str, Scope] = field(default_factory=dict)
    categories: dict[str, Category] = field(default_factory=dict)
    retired: dict[int, str] = field(default_factory=dict)

    def scope(self, name: str, value: int, shard_attributes: tuple[str, ...] = ()) -> Scope:
        for existing in self.scopes.values():
            if existing.name == name or existing.value == value:
                raise ShardError(
                    f"scope {name}={value} clashes with scope {existing.name}={existing.value}"
                )
        declared = Scope(name, value, shard_attributes)
        self.scopes[name] = declared
        return declared

    def category(self, name: str, value: int, scope: Scope, *, coalesce: bool = False) -> Category:
        if self.scopes.get(scope.name) is not scope:
            raise ShardError(
                f"category {name}: scope {scope.name} is not registered in this registry"
            )
        if value in self.retired:
            raise ShardError(
                f"category {name}={value}: value {value} was retired ({self.retired[value]}); pick a new one"
            )
        for existing in self.categories.values():
            if existing.name == name:
                raise ShardError(
                    f"category {name} is already registered to scope {existing.scope.name}; "
                    "a category belongs to exactly one scope"
                )
            if existing.value == value:
                raise ShardError(
                    f"category {name}={value} clashes with category {existing.name}={value}"
                )
        declared = Category(name, value, scope, coalesce)
        self.categories[name] = declared
        return declared

    def retire(self, value: int, name: str) -> None:
        """Reserve a removed category's value forever."""
        for existing in self.categories.values():
            if existing.value == value:
                raise ShardError(f"cannot retire {value}: category {existing.name} still uses it")
        self.retired[value] = name

    def get(self, name: str) -> Category:
        try:
            return self.categories[name]
        except KeyError:
            raise ShardError(f"unknown category {name!r}") from None


def infer_shard_identifier(scope: Scope, instance: Any) -> str:
    """The first of the scope's shard attributes that the instance has and sets."""
    for attribute in scope.shard_attributes:
        value = getattr(instance, attribute, None)
        if value is not None:
            return str(value)
    raise ShardError(
        f"cannot infer the {scope.name} shard identifier of {type(instance).__name__}: none of "
        f"{list(scope.shard_attributes)} is set; pass shard_identifier= explicitly"
    )


def shard_headers(category: Category, object_identifier: str | int) -> dict[str, Any]:
    headers: dict[str, Any] = {
        SCOPE_HEADER: category.scope.value,
        CATEGORY_HEADER: category.value,
        OBJECT_HEADER: str(object_identifier),
    }
    if category.coalesce:
        headers[COALESCE_HEADER] = True
    return headers
