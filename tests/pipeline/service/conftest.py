"""API keys of two tenants (one with a role, one rate-limited) in a fresh key store."""

import pytest

from pipeline.service.keys import KeyStore


@pytest.fixture
def keys(tmp_path):
    store = KeyStore.open(tmp_path / "keys.json", create=True)
    return store, {"a": store.create("a"), "legal": store.create("a", roles=frozenset({"legal"})),
                   "b": store.create("b"), "slow": store.create("a", rate_per_minute=6)}
