"""`context-engine`: serve the services (the default) or look at a running engine.

    context-engine [--service all|capture|assembly|compaction] [--config FILE] [--port N]
    context-engine doctor | assemble | expand | checkpoints | inspect | export-user | delete-user

The subcommands are for people: each prints plain lines, and a failure is one `error:` line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from contextengine.v1 import common_pb2
from contextengine_client import ContextEngine
from grpc import aio

from shared.cli import doctor, sessions, user_data
from shared.config import Settings, load_settings
from shared.errors import BackendError, ConfigurationError
from shared.openviking.tenant import Tenant
from shared.runtime import main as serve

DEFAULT_TARGET = "127.0.0.1:50051"
COMMANDS = ("doctor", "assemble", "expand", "checkpoints", "inspect", "export-user", "delete-user")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="context-engine", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def command(
        name: str, help_text: str, *, grpc: bool = False, config: bool = False, session: str = ""
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if grpc:
            sub.add_argument(
                "--target",
                default=DEFAULT_TARGET,
                help=f"the engine's gRPC address (default {DEFAULT_TARGET})",
            )
        if config:
            sub.add_argument(
                "--config",
                type=Path,
                default=None,
                help="the engine's JSON config (default $CONTEXT_ENGINE_CONFIG)",
            )
        if name != "doctor":
            sub.add_argument("--account", default="default", help="account_id (default: default)")
            sub.add_argument("--user", required=True, help="user_id")
            sub.add_argument("--agent", default="", help="agent_id (default: the engine's agentId)")
        if session == "required":
            sub.add_argument("--session", required=True, help="session_id")
        elif session == "optional":
            sub.add_argument("--session", default="", help="session_id (default: all the user's sessions)")
        return sub

    sub = command(
        "doctor",
        "check OpenViking, the embedder, the config, the engine's port and versions",
        grpc=True,
        config=True,
    )
    sub.set_defaults(target=None)
    sub = command(
        "assemble", "what a new session's model would see for a prompt", grpc=True, session="required"
    )
    sub.add_argument("prompt")
    sub.add_argument(
        "--budget", type=int, default=0, help="token budget (0 = the engine's defaultTokenBudget)"
    )
    sub = command(
        "expand", "the raw turns behind a summary, checkpoint or recalled URI", grpc=True, session="required"
    )
    sub.add_argument("uri")
    sub.add_argument("--query", default="", help="rank the turns by this text")
    sub.add_argument("--limit", type=int, default=0, help="turns per page (0 = memoryExpandMaxResults)")
    command(
        "checkpoints",
        "a session's checkpoints (the user's, without --session)",
        grpc=True,
        session="optional",
    )
    command(
        "inspect",
        "what the engine holds for a session: state, turns, turn index",
        config=True,
        session="required",
    )
    command("export-user", "every file of a user's data as JSON lines on stdout", config=True)
    sub = command("delete-user", "delete all of a user's data (lists it without --yes)", config=True)
    sub.add_argument("--yes", action="store_true", help="really delete")
    return parser


def _identity(args: argparse.Namespace) -> common_pb2.Identity:
    return common_pb2.Identity(
        account_id=args.account,
        user_id=args.user,
        agent_id=args.agent,
        session_id=getattr(args, "session", ""),
    )


async def _over_grpc(args: argparse.Namespace) -> None:
    async with ContextEngine.connect(args.target) as engine:
        who = _identity(args)
        if args.command == "assemble":
            await sessions.assemble(engine, who, args.prompt, args.budget)
        elif args.command == "expand":
            await sessions.expand(engine, who, args.uri, args.query, args.limit)
        else:
            await sessions.checkpoints(engine, who)


async def _with_settings(args: argparse.Namespace, settings: Settings) -> None:
    if args.command == "inspect":
        await sessions.inspect(settings, _identity(args))
        return
    tenant = Tenant(args.account, args.user)
    if args.command == "export-user":
        count = await user_data.export_user(settings, tenant)
        print(f"exported {count} files of {args.account}/{args.user}", file=sys.stderr)
        return
    listed = await user_data.delete_user(settings, tenant, really=args.yes)
    verb = "deleted" if args.yes else "would delete (run again with --yes)"
    print(f"{verb}: " + (", ".join(listed) or "nothing, the user has no data"))


def _run(work: Callable[[], Coroutine[Any, Any, None]]) -> int:
    try:
        asyncio.run(work())
    except aio.AioRpcError as error:
        print(f"error: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    except (BackendError, ConfigurationError) as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] in (["-h"], ["--help"]):
        _parser().print_help()
        print("\nserve: context-engine --service all|capture|assembly|compaction [--config FILE] [--port N]")
        return
    if not args_in or args_in[0] not in COMMANDS:
        serve.main(args_in)  # `context-engine --service ...`, as the image and make run start it
        return
    args = _parser().parse_args(args_in)
    if args.command == "doctor":
        sys.exit(doctor.run(args.config, args.target, os.environ))
    if args.command in ("assemble", "expand", "checkpoints"):
        sys.exit(_run(lambda: _over_grpc(args)))
    try:
        settings = load_settings(args.config)
    except ConfigurationError as error:
        print(error.message, file=sys.stderr)
        sys.exit(2)
    sys.exit(_run(lambda: _with_settings(args, settings)))
