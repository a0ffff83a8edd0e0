"""Async HTTP client for OpenViking 0.5.2 (talks HTTP only; never imports openviking)."""

from shared.openviking._archive_files_api import archive_uri_for
from shared.openviking._sessions_api import MAX_BATCH_MESSAGES
from shared.openviking.auth import (
    AdminApi,
    ApiKeyAuth,
    AuthStrategy,
    DevAuth,
    ProvisionedKey,
    TrustedAuth,
    UserKeyProvider,
)
from shared.openviking.client import OpenVikingClient
from shared.openviking.keys import ProvisioningUserKeys, StaticUserKeys
from shared.openviking.models.archive_files import (
    ArchiveDone,
    ArchiveFailure,
    ArchiveMeta,
    ArchivePhase1,
    MemoryAdd,
    MemoryDelete,
    MemoryDiff,
    MemoryUpdate,
)
from shared.openviking.models.content import (
    BatchWriteResult,
    FsAttrs,
    FsEntry,
    FsListing,
    FsStat,
    RemoveResult,
    WriteResult,
)
from shared.openviking.models.parts import (
    ContextPart,
    MessageKind,
    NewMessage,
    OtherPart,
    Part,
    SendablePart,
    TextPart,
    ToolPart,
    ToolStatus,
)
from shared.openviking.models.search import FindResult, GrepMatch, GrepResult, SearchHit
from shared.openviking.models.sessions import (
    CommitResult,
    ContextStats,
    MessagesAdded,
    SessionArchive,
    SessionContext,
    SessionCreated,
    SessionInfo,
    SessionMessage,
    SessionSummary,
    SessionUser,
)
from shared.openviking.models.system import Health, Readiness, SystemStatus
from shared.openviking.models.tasks import TERMINAL_TASK_STATUSES, TaskInfo, TaskStatus
from shared.openviking.settings import CallKind, CallTimeouts, PoolLimits, RetryPolicy
from shared.openviking.tenant import Tenant
from shared.openviking.transport import HeaderProvider

__all__ = [
    "MAX_BATCH_MESSAGES",
    "TERMINAL_TASK_STATUSES",
    "AdminApi",
    "ApiKeyAuth",
    "ArchiveDone",
    "ArchiveFailure",
    "ArchiveMeta",
    "ArchivePhase1",
    "AuthStrategy",
    "BatchWriteResult",
    "CallKind",
    "CallTimeouts",
    "CommitResult",
    "ContextPart",
    "ContextStats",
    "DevAuth",
    "FindResult",
    "FsAttrs",
    "FsEntry",
    "FsListing",
    "FsStat",
    "GrepMatch",
    "GrepResult",
    "HeaderProvider",
    "Health",
    "MemoryAdd",
    "MemoryDelete",
    "MemoryDiff",
    "MemoryUpdate",
    "MessageKind",
    "MessagesAdded",
    "NewMessage",
    "OpenVikingClient",
    "OtherPart",
    "Part",
    "PoolLimits",
    "ProvisionedKey",
    "ProvisioningUserKeys",
    "Readiness",
    "RemoveResult",
    "RetryPolicy",
    "SearchHit",
    "SendablePart",
    "SessionArchive",
    "SessionContext",
    "SessionCreated",
    "SessionInfo",
    "SessionMessage",
    "SessionSummary",
    "SessionUser",
    "StaticUserKeys",
    "SystemStatus",
    "TaskInfo",
    "TaskStatus",
    "Tenant",
    "TextPart",
    "ToolPart",
    "ToolStatus",
    "TrustedAuth",
    "UserKeyProvider",
    "WriteResult",
    "archive_uri_for",
]
