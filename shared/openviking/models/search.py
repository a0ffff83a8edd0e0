"""Retrieval results: find/search hits and grep matches."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.openviking.models._base import ResultModel


class SearchHit(ResultModel):
    """One hit; `level` 0 = directory abstract, 1 = directory overview, 2 = a file."""

    context_type: Literal["memory", "resource", "skill"] | str = "memory"
    uri: str
    level: int = 2
    score: float = 0.0
    abstract: str = ""
    tags: list[str] = Field(default_factory=list)
    content: str | None = None
    """Only with `read_content=True`."""


class FindResult(ResultModel):
    memories: list[SearchHit] = Field(default_factory=list)
    resources: list[SearchHit] = Field(default_factory=list)
    skills: list[SearchHit] = Field(default_factory=list)
    total: int = 0

    @property
    def hit_count(self) -> int:
        """Hits on this page, of every context type (what `limit` bounds)."""
        return len(self.memories) + len(self.resources) + len(self.skills)


class GrepContextLine(ResultModel):
    line: int = 0
    content: str = ""


class GrepMatch(ResultModel):
    line: int = 0
    uri: str = ""
    content: str = ""
    before_context: list[GrepContextLine] = Field(default_factory=list)
    after_context: list[GrepContextLine] = Field(default_factory=list)
    """Only with `before_context` / `after_context` > 0."""


class GrepResult(ResultModel):
    matches: list[GrepMatch] = Field(default_factory=list)
    count: int = 0
    match_count: int = 0
    files_scanned: int = 0
