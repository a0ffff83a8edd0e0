"""Routing tenants to OpenViking shards: stable, deterministic, spread, minimal movement, pins."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.config import load_settings
from shared.errors import ConfigurationError
from shared.openviking.shards import (
    Shard,
    ShardMap,
    parse_tenant_key,
    pins_to_stay_put,
    rendezvous,
    tenant_key,
)
from shared.openviking.tenant import Tenant

IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True)
TENANTS = st.builds(Tenant, IDS, IDS)
NAMES = st.lists(st.from_regex(r"ov-[a-z0-9]{1,6}", fullmatch=True), min_size=1, max_size=8, unique=True)
POPULATION = [Tenant(f"acct{a}", f"user{u}") for a in range(40) for u in range(50)]


def shard_map(names: list[str], pins: dict[str, str] | None = None) -> ShardMap:
    return ShardMap(tuple(Shard(n, f"http://{n}:1933") for n in names), pins or {})


@given(TENANTS, NAMES, st.randoms())
def test_the_shard_depends_on_the_set_of_names_not_their_order(
    tenant: Tenant, names: list[str], rng: random.Random
) -> None:
    shuffled = list(names)
    rng.shuffle(shuffled)
    assert shard_map(names).shard_for(tenant) == shard_map(shuffled).shard_for(tenant)
    assert shard_map(names).shard_for(tenant) in names


def test_every_process_routes_identically() -> None:
    """Replicas agree with no coordination: other processes (other hash seeds) give the same map."""
    names = ["ov-0", "ov-1", "ov-2"]
    here = {tenant_key(t): shard_map(names).shard_for(t) for t in POPULATION[:300]}
    script = (
        "import json,sys; from shared.openviking.shards import rendezvous;"
        "keys=json.load(sys.stdin);"
        "print(json.dumps({k: rendezvous(k, ['ov-2','ov-0','ov-1']) for k in keys}))"
    )
    for seed in ("1", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", script],
            input=json.dumps(list(here)),
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert json.loads(out.stdout) == here


@pytest.mark.parametrize("count", [2, 3, 5])
def test_tenants_spread_evenly(count: int) -> None:
    names = [f"ov-{i}" for i in range(count)]
    per_shard = Counter(shard_map(names).shard_for(t) for t in POPULATION)
    expected = len(POPULATION) / count
    assert set(per_shard) == set(names)
    assert all(abs(n - expected) < 0.15 * expected for n in per_shard.values()), per_shard


@given(TENANTS, NAMES, st.from_regex(r"new-[a-z0-9]{1,6}", fullmatch=True))
def test_adding_a_shard_moves_tenants_only_onto_it(tenant: Tenant, names: list[str], added: str) -> None:
    before = shard_map(names).shard_for(tenant)
    after = shard_map([*names, added]).shard_for(tenant)
    assert after in (before, added)


@given(TENANTS, NAMES.filter(lambda names: len(names) > 1), st.data())
def test_removing_a_shard_moves_only_its_tenants(
    tenant: Tenant, names: list[str], data: st.DataObject
) -> None:
    removed = data.draw(st.sampled_from(names))
    before = shard_map(names).shard_for(tenant)
    after = shard_map([n for n in names if n != removed]).shard_for(tenant)
    assert before in (after, removed)


@pytest.mark.parametrize("count", [1, 2, 4])
def test_adding_a_shard_moves_about_one_in_n_plus_one(count: int) -> None:
    names = [f"ov-{i}" for i in range(count)]
    before, after = shard_map(names), shard_map([*names, "ov-new"])
    moved = sum(before.shard_for(t) != after.shard_for(t) for t in POPULATION)
    share = moved / len(POPULATION)
    assert abs(share - 1 / (count + 1)) < 0.15 / (count + 1), share


@given(TENANTS, NAMES, st.data())
def test_a_pin_overrides_the_hash(tenant: Tenant, names: list[str], data: st.DataObject) -> None:
    pinned = data.draw(st.sampled_from(names))
    assert shard_map(names, {tenant_key(tenant): pinned}).shard_for(tenant) == pinned


@given(st.lists(TENANTS, max_size=60, unique=True), NAMES, st.lists(TENANTS, max_size=20))
def test_pins_to_stay_put_keep_known_tenants_and_send_new_ones_by_hash(
    known: list[Tenant], names: list[str], newcomers: list[Tenant]
) -> None:
    before = shard_map(names)
    grown = before.with_shards([Shard("ov-added", "http://ov-added:1933")], {})
    pins = pins_to_stay_put(known, before, grown)
    deployed = before.with_shards([Shard("ov-added", "http://ov-added:1933")], pins)
    assert all(deployed.shard_for(t) == before.shard_for(t) for t in known)
    assert set(pins) == {tenant_key(t) for t in known if grown.shard_for(t) != before.shard_for(t)}
    unknown = [t for t in newcomers if t not in known]
    assert all(deployed.shard_for(t) == grown.shard_for(t) for t in unknown)


def test_pins_needed_when_adding_a_third_shard_are_about_a_third() -> None:
    before = shard_map(["ov-0", "ov-1"])
    pins = pins_to_stay_put(POPULATION, before, shard_map(["ov-0", "ov-1", "ov-2"]))
    assert 0.28 < len(pins) / len(POPULATION) < 0.39
    assert set(pins.values()) <= {"ov-0", "ov-1"}


@given(TENANTS)
def test_the_routing_key_round_trips(tenant: Tenant) -> None:
    assert parse_tenant_key(tenant_key(tenant)) == tenant


def test_rendezvous_is_the_documented_hash() -> None:
    """Pinned values, so a change to the hash (which would move tenants) cannot go unnoticed."""
    routed = [rendezvous(f"acme/u{i}", ["ov-0", "ov-1"]) for i in range(8)]
    assert routed == ["ov-0", "ov-1", "ov-1", "ov-1", "ov-1", "ov-1", "ov-1", "ov-1"]


def test_settings_read_shards_and_pins_from_the_environment() -> None:
    settings = load_settings(
        environ={
            "CONTEXT_ENGINE_OPENVIKING_SHARDS": "ov-0=http://ov-0:1933, ov-1=http://ov-1:1933",
            "CONTEXT_ENGINE_OPENVIKING_SHARD_PINS": "acme/alice=ov-1",
        }
    )
    routing = settings.openviking_shard_map
    assert routing.names == ("ov-0", "ov-1")
    assert routing.shard_for(Tenant("acme", "alice")) == "ov-1"
    assert routing.shards[1].base_url == "http://ov-1:1933"


def test_settings_read_shards_from_a_config_object() -> None:
    settings = load_settings(
        environ={}, overrides={"openvikingShards": {"a": "http://a:1", "b": "http://b:1"}}
    )
    assert settings.openviking_shard_map.names == ("a", "b")


def test_a_single_base_url_keeps_working_unchanged() -> None:
    settings = load_settings(environ={"CONTEXT_ENGINE_BASE_URL": "http://ov:1933"})
    assert settings.openviking_shard_map == ShardMap.single("http://ov:1933")


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"openvikingShards": "ov-0=http://a:1,ov-0=http://b:1"}, "openvikingShards"),
        ({"openvikingShards": "Bad_Name=http://a:1"}, "'Bad_Name'"),
        ({"openvikingShards": "ov-0=ftp://a"}, "'ov-0': URL"),
        ({"openvikingShards": "ov-0"}, "name=url"),
        ({"openvikingShards": "ov-0=http://a:1", "openvikingShardPins": "acme/al=ov-9"}, "'acme/al'"),
        ({"openvikingShards": "ov-0=http://a:1", "openvikingShardPins": "acme=ov-0"}, "'acme'"),
        ({"openvikingShardPins": "acme/al=ov-0"}, "openvikingShardPins"),
    ],
)
def test_bad_shard_settings_are_refused_naming_the_entry(overrides: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_settings(environ={}, overrides=overrides)
    assert named in raised.value.message


def test_the_shard_plan_prints_the_pins_that_keep_known_tenants_put() -> None:
    tenants = POPULATION[:200]
    planned = subprocess.run(
        [sys.executable, "-m", "shared.openviking.shard_plan", "--shards", "ov-0=http://a:1,ov-1=http://b:1",
         "--pins", "acct0/user0=ov-1", "--add", "ov-2=http://c:1"],
        input="\n".join(tenant_key(t) for t in tenants),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    settings = load_settings(
        environ={
            "CONTEXT_ENGINE_OPENVIKING_SHARDS": planned.stdout.splitlines()[0].removeprefix("shards="),
            "CONTEXT_ENGINE_OPENVIKING_SHARD_PINS": planned.stdout.splitlines()[1].removeprefix("pins="),
        }
    )
    before = shard_map(["ov-0", "ov-1"], {"acct0/user0": "ov-1"})
    assert settings.openviking_shard_map.names == ("ov-0", "ov-1", "ov-2")
    assert all(settings.openviking_shard_map.shard_for(t) == before.shard_for(t) for t in tenants)
    assert "tenants pinned to stay put" in planned.stderr
