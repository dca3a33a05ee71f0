from __future__ import annotations

from types import SimpleNamespace

import pytest

from outbox_engine.creation.shards import ShardError, ShardRegistry, infer_shard_identifier


def test_categories_belong_to_exactly_one_scope_and_values_never_clash() -> None:
    shards = ShardRegistry()
    org = shards.scope("organization", 0, shard_attributes=("organization_id", "id"))
    user = shards.scope("user", 1)
    shards.category("org_update", 10, org, coalesce=True)
    with pytest.raises(ShardError, match="already registered to scope organization"):
        shards.category("org_update", 11, user)
    with pytest.raises(ShardError, match="clashes with category org_update=10"):
        shards.category("user_update", 10, user)
    with pytest.raises(ShardError, match="clashes with scope organization=0"):
        shards.scope("team", 0)
    with pytest.raises(ShardError, match="is not registered in this registry"):
        ShardRegistry().category("x", 1, org)


def test_retired_values_stay_reserved() -> None:
    shards = ShardRegistry()
    org = shards.scope("organization", 0)
    shards.retire(12, "org_rename")
    with pytest.raises(ShardError, match="value 12 was retired"):
        shards.category("org_new", 12, org)
    shards.category("org_update", 10, org)
    with pytest.raises(ShardError, match="category org_update still uses it"):
        shards.retire(10, "org_update")


def test_shard_identifiers_are_inferred_from_the_scope_attributes() -> None:
    shards = ShardRegistry()
    org = shards.scope("organization", 0, shard_attributes=("organization_id", "id"))
    assert infer_shard_identifier(org, SimpleNamespace(organization_id=7, id=99)) == "7"
    assert infer_shard_identifier(org, SimpleNamespace(organization_id=None, id=99)) == "99"
    with pytest.raises(ShardError, match="pass shard_identifier= explicitly"):
        infer_shard_identifier(org, SimpleNamespace(name="x"))
