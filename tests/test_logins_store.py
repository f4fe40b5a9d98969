"""The dashboard's logins in the store, on SQLite and PostgreSQL: made from a live token, kept
as a digest, found by id only, ended by expiry, logout or revoking the token."""

from __future__ import annotations

import hashlib

import pytest

from longcall.core.clock import FakeClock
from longcall.store import Store


def test_a_login_is_made_from_a_live_token_and_kept_as_a_digest(store: Store) -> None:
    """create_login returns a fresh random id; only its sha256 digest finds the login."""
    token = store.create_token(user_id="alice")[1]
    made = store.create_login(token, ttl=60)
    assert made is not None
    login, login_id = made
    assert login.user_id == "alice" and not login.admin
    assert login.expires_at == pytest.approx(login.created_at + 60)
    assert login_id != token and len(login_id) >= 40
    found = store.login_info(login_id)
    assert found == login
    # The table holds the digest, not the id: looking the digest up as an id finds nothing.
    digest = hashlib.sha256(login_id.encode()).hexdigest()
    assert store.login_info(digest) is None
    row = store._transact(
        lambda tx: tx.one("login_by_hash", login_hash=digest, now=store.clock.now()),
        write=False,
    )
    assert row is not None and row["login_hash"] == digest
    assert (
        store._transact(
            lambda tx: tx.one("login_by_hash", login_hash=login_id, now=store.clock.now()),
            write=False,
        )
        is None
    )
    # A second login of the same token is another id.
    again = store.create_login(token, ttl=60)
    assert again is not None and again[1] != login_id


def test_an_unknown_or_revoked_token_makes_no_login(store: Store) -> None:
    """create_login answers None for a token that is unknown or revoked."""
    assert store.create_login("lc_nope_nothing", ttl=60) is None
    info, token = store.create_token(user_id="bob")
    store.revoke_token(info.token_id)
    assert store.create_login(token, ttl=60) is None
    with pytest.raises(ValueError, match="positive"):
        store.create_login(token, ttl=0)


def test_a_login_expires_and_its_row_is_deleted(store: Store, clock: FakeClock) -> None:
    """Past its ttl a login is not found, and looking it up deletes its row."""
    token = store.create_token(user_id="alice")[1]
    made = store.create_login(token, ttl=30)
    assert made is not None
    _, login_id = made
    clock.advance(29)
    assert store.login_info(login_id) is not None
    clock.advance(1)
    assert store.login_info(login_id) is None
    assert store.end_login(login_id) is False  # already deleted when found expired


def test_ending_a_login_deletes_it_and_repeating_is_harmless(store: Store) -> None:
    """end_login (logout) deletes the row; a second call finds nothing; others live on."""
    token = store.create_token(user_id="alice")[1]
    first, second = store.create_login(token, ttl=60), store.create_login(token, ttl=60)
    assert first is not None and second is not None
    assert store.end_login(first[1]) is True
    assert store.login_info(first[1]) is None
    assert store.end_login(first[1]) is False
    assert store.login_info(second[1]) is not None


def test_revoking_the_token_ends_its_logins(store: Store) -> None:
    """A revoked token's logins are not found, and the next prune deletes them."""
    info, token = store.create_token(user_id="alice")
    other = store.create_token(user_id="bob")[1]
    mine, theirs = store.create_login(token, ttl=60), store.create_login(other, ttl=60)
    assert mine is not None and theirs is not None
    store.revoke_token(info.token_id)
    assert store.login_info(mine[1]) is None
    assert store.login_info(theirs[1]) is not None
    assert store.prune_logins() == 1
    assert store.login_info(theirs[1]) is not None


def test_prune_deletes_only_the_expired(store: Store, clock: FakeClock) -> None:
    """prune_logins deletes the expired logins and keeps the live ones."""
    token = store.create_token(user_id="alice")[1]
    short, long = store.create_login(token, ttl=10), store.create_login(token, ttl=100)
    assert short is not None and long is not None
    clock.advance(50)
    assert store.prune_logins() == 1
    assert store.end_login(short[1]) is False
    assert store.login_info(long[1]) is not None
