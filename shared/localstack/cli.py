"""``python -m shared.localstack install|up|status``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from shared.localstack.layout import StackLayout
from shared.localstack.runtimes import provision_all


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.localstack")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help="provision the private venvs (idempotent)")
    args = parser.parse_args(argv)
    layout = StackLayout.from_env()
    if args.command == "install":
        provision_all(layout)
    return 0
