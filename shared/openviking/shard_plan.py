"""`python -m shared.openviking.shard_plan`: the pins that keep known tenants put when shards are added.

    python -m shared.openviking.shard_plan \\
        --shards "ov-0=http://openviking-0:1933,ov-1=http://openviking-1:1933" \\
        --pins "$CURRENT_PINS" --add "ov-2=http://openviking-2:1933" < tenants.txt

`tenants.txt` holds one `<account_id>/<user_id>` per line (every tenant that has data). Prints
the new `shards` and `pins` values for the openviking-shards ConfigMap: the current pins plus one
pin per tenant the added shard would otherwise take (~1/N of them), so the new shard receives
only new tenants.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from shared.errors import InvalidArgument
from shared.openviking.shards import (
    ShardMap,
    parse_pin_list,
    parse_shard_list,
    parse_tenant_key,
    pins_to_stay_put,
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m shared.openviking.shard_plan", description=__doc__)
    parser.add_argument("--shards", required=True, help="current shards, name=url,...")
    parser.add_argument("--pins", default="", help="current pins, account/user=shard,...")
    parser.add_argument("--add", required=True, help="shards to add, name=url,...")
    args = parser.parse_args(argv)
    try:
        before = ShardMap(parse_shard_list(args.shards), parse_pin_list(args.pins))
        after = before.with_shards(parse_shard_list(args.add), {})
        tenants = [parse_tenant_key(line.strip()) for line in sys.stdin if line.strip()]
    except (ValueError, InvalidArgument) as exc:
        parser.error(str(exc))
    pins = {**before.pins, **pins_to_stay_put(tenants, before, after)}
    print("shards=" + ",".join(f"{s.name}={s.base_url}" for s in after.shards))
    print("pins=" + ",".join(f"{key}={name}" for key, name in sorted(pins.items())))
    print(f"# {len(pins) - len(before.pins)} of {len(tenants)} tenants pinned to stay put", file=sys.stderr)


if __name__ == "__main__":
    main()
