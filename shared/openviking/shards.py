"""Which OpenViking server a tenant lives on: rendezvous hashing over shard names, plus pins.

Routing key: the tenant, `<account_id>/<user_id>` (`/` cannot occur in either id). Every
session, memory, turn index and checkpoint of a user lives under that user in OpenViking, so
one user's data is never split across servers.

Hashing: rendezvous (highest random weight). Each shard scores `sha256(name NUL key)`; the
highest score wins (a tie, which needs a 64-bit collision, goes to the larger name). The
answer depends only on the key and the set of names, never on order, process or replica: every
replica routes identically with no coordination. Adding a shard to N moves only the ~1/(N+1) of
tenants that now score highest on it; removing one moves only its own tenants.

Pins: `tenant key -> shard name` entries override the hash. `pins_to_stay_put` computes the
pins that keep every known tenant where it is when shards are added, so a new shard takes only
new tenants; deleting a pin (after copying the tenant's data) moves a tenant to its hashed shard.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from shared.errors import FailedPrecondition, InvalidArgument
from shared.openviking.tenant import Tenant

DEFAULT_SHARD = "default"
"""Name of the one shard of a single-URL configuration."""
SHARD_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
"""A shard name is a DNS label, so it can name a Service and a health check (`openviking/<name>`)."""
_URL = re.compile(r"https?://\S+")


class UnroutableCall(FailedPrecondition):
    """A call without a tenant on a client that spans several shards: pick one explicitly."""


def tenant_key(tenant: Tenant) -> str:
    """The routing key: `<account_id>/<user_id>`."""
    return f"{tenant.account_id}/{tenant.user_id}"


def parse_tenant_key(key: str) -> Tenant:
    """The tenant a pin names; `InvalidArgument` (naming the id) when it is not a tenant key."""
    account_id, slash, user_id = key.partition("/")
    return Tenant(account_id, user_id if slash else "")


def _score(shard: str, key: str) -> int:
    digest = hashlib.sha256(f"{shard}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def rendezvous(key: str, shards: Iterable[str]) -> str:
    """The shard among `shards` with the highest random weight for `key`."""
    return max(shards, key=lambda name: (_score(name, key), name))


@dataclass(frozen=True)
class Shard:
    name: str
    """A DNS label (`SHARD_NAME`), e.g. `ov-0`."""
    base_url: str
    """The shard's OpenViking base URL."""


@dataclass(frozen=True)
class ShardMap:
    """The shards and the pins; `shard_for` is the whole routing decision."""

    shards: tuple[Shard, ...]
    pins: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Tenant key -> shard name; overrides the hash."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "pins", MappingProxyType(dict(self.pins)))
        problems = shard_map_problems(self.shards, self.pins)
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def single(cls, base_url: str) -> ShardMap:
        """One server: every call, with or without a tenant, goes to `base_url`."""
        return cls((Shard(DEFAULT_SHARD, base_url),))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(shard.name for shard in self.shards)

    def shard_for(self, tenant: Tenant) -> str:
        """The name of the shard that holds `tenant`'s data."""
        key = tenant_key(tenant)
        pinned = self.pins.get(key)
        return pinned if pinned is not None else rendezvous(key, self.names)

    def with_shards(self, added: Iterable[Shard], pins: Mapping[str, str]) -> ShardMap:
        """This map with `added` shards and `pins` merged over the current pins."""
        return ShardMap((*self.shards, *added), {**self.pins, **pins})


def shard_map_problems(shards: Iterable[Shard], pins: Mapping[str, str]) -> list[str]:
    """Every problem of a shard list and its pins, each naming the entry (empty when valid)."""
    problems: list[str] = []
    names: set[str] = set()
    for shard in shards:
        if not SHARD_NAME.fullmatch(shard.name):
            problems.append(f"shard {shard.name!r}: name must be a DNS label ([a-z0-9-], at most 63)")
        if shard.name in names:
            problems.append(f"shard {shard.name!r}: listed twice")
        if not _URL.fullmatch(shard.base_url):
            problems.append(f"shard {shard.name!r}: URL must be http(s)://..., got {shard.base_url!r}")
        names.add(shard.name)
    if not names:
        problems.append("no shards")
    for key, name in pins.items():
        try:
            parse_tenant_key(key)
        except InvalidArgument as exc:
            problems.append(f"pin {key!r}: not <account_id>/<user_id> ({exc.message})")
        if name not in names:
            problems.append(f"pin {key!r}: names shard {name!r}, which is not configured")
    return problems


def pins_to_stay_put(tenants: Iterable[Tenant], before: ShardMap, after: ShardMap) -> dict[str, str]:
    """The pins that keep each of `tenants` on its `before` shard once `after` is deployed.

    Only tenants that `after` would place elsewhere get a pin (~1/N of them when one shard is
    added to N-1); merge the result into `after`'s pins and every known tenant stays put.
    """
    return {
        tenant_key(tenant): before.shard_for(tenant)
        for tenant in tenants
        if after.shard_for(tenant) != before.shard_for(tenant)
    }


def parse_shard_list(text: str) -> tuple[Shard, ...]:
    """`name=url,name=url` (the environment form); blanks around entries are ignored."""
    shards: list[Shard] = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        name, equals, url = entry.partition("=")
        if not equals:
            raise ValueError(f"shard entry {entry!r}: expected name=url")
        shards.append(Shard(name.strip(), url.strip()))
    return tuple(shards)


def parse_pin_list(text: str) -> dict[str, str]:
    """`account/user=shard,...` (the environment form of the pins)."""
    pins: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        key, equals, name = entry.rpartition("=")
        if not equals:
            raise ValueError(f"pin entry {entry!r}: expected account/user=shard")
        pins[key.strip()] = name.strip()
    return pins
