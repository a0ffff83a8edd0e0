"""A generated long conversation (no third-party data): facts with names, numbers and dates said
between plenty of social exchanges, one exchange per day or so, for the extractive summary's
tests and its measurement (`python -m tests.compaction.long_session`)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from contextengine.v1 import common_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from services.assembly.summaries import MAX_SUMMARY_CHECKPOINTS
from services.compaction.engine_summary import engine_summary_of
from services.compaction.history import summary_of_summaries
from shared.domain.checkpoints import EngineSummary
from shared.domain.envelope import PersistedTurn
from shared.tokens import TokenCounter

PEOPLE = ("Priya", "Marcus", "Elena", "Tomasz", "Aiko", "Rafael", "Ingrid", "Kwame", "Sofia", "Dmitri")
PLACES = ("Lisbon", "Denver", "Osaka", "Nairobi", "Toronto", "Krakow", "Valparaiso", "Bergen")
THINGS = ("a cello", "a used Subaru", "a pottery kiln", "a sailboat", "a drone", "a road bike")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September")
SOCIAL = (
    ("Hi! How are you today?", "Doing well, thanks for asking! How about you?"),
    ("Thanks so much, that really helps.", "You're welcome, happy to help anytime."),
    ("Great chatting with you!", "Likewise, talk soon!"),
    ("Haha that's funny.", "Glad it made you smile."),
    ("Good morning!", "Good morning! What's on your mind?"),
    ("Ok cool.", "Sounds good."),
)


@dataclass(frozen=True)
class Exchange:
    said_at: datetime
    user: str
    assistant: str
    fact: bool


def _fact(rng: random.Random) -> tuple[str, str]:
    person, other = rng.sample(PEOPLE, 2)
    place = rng.choice(PLACES)
    month = rng.choice(MONTHS)
    day = rng.randint(1, 28)
    amount = rng.randint(120, 9800)
    kind = rng.randrange(4)
    if kind == 0:
        return (
            f"My friend {person} is moving to {place} on {month} {day}.",
            f"That's a big step for {person}; {place} in {month} should be lovely.",
        )
    if kind == 1:
        return (
            f"I finally bought {rng.choice(THINGS)} from {person} for {amount} dollars.",
            f"Nice, {amount} dollars sounds fair. Did {person} include the case?",
        )
    if kind == 2:
        return (
            f"We decided the team offsite with {person} and {other} is in {place}, budget {amount} euros.",
            f"Noted: offsite in {place} with {person} and {other}, {amount} euros.",
        )
    return (
        f"{person} ran the half marathon in {rng.randint(85, 140)} minutes last weekend.",
        f"Impressive! Is {person} training for the full one in {month}?",
    )


def generated_exchanges(count: int, *, seed: int = 7, social_share: float = 0.5) -> list[Exchange]:
    rng = random.Random(seed)
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    out = []
    for index in range(count):
        said_at = start + timedelta(days=index // 2, minutes=index % 2 * 30)
        if rng.random() < social_share:
            user, assistant = rng.choice(SOCIAL)
            out.append(Exchange(said_at, user, assistant, False))
        else:
            user, assistant = _fact(rng)
            out.append(Exchange(said_at, user, assistant, True))
    return out


def _message(
    role: common_pb2.MessageRole, text: str, at: datetime, sequence: int
) -> common_pb2.ConversationMessage:
    stamp = Timestamp()
    stamp.FromDatetime(at)
    return common_pb2.ConversationMessage(
        id=f"m-{sequence}",
        role=role,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))],
        timestamp=stamp,
    )


def host_messages(exchanges: list[Exchange], start: int = 0) -> list[common_pb2.ConversationMessage]:
    """Each exchange as a user and an assistant message, numbered from `start`."""
    out = []
    for index, exchange in enumerate(exchanges):
        sequence = start + 2 * index
        out.append(_message(common_pb2.MESSAGE_ROLE_USER, exchange.user, exchange.said_at, sequence))
        answered = exchange.said_at + timedelta(seconds=20)
        out.append(_message(common_pb2.MESSAGE_ROLE_ASSISTANT, exchange.assistant, answered, sequence + 1))
    return out


def persisted(messages: list[common_pb2.ConversationMessage]) -> list[PersistedTurn]:
    return [PersistedTurn(f"ct-{i:07d}", i, m) for i, m in enumerate(messages)]


@dataclass(frozen=True)
class Level:
    """One summary of the measured session: what it covers and what it keeps of it."""

    name: str
    tokens: int
    covers_turns: int
    kept: dict[str, int]
    total: dict[str, int]


def measured_levels(
    compactions: int, turns_each: int, max_tokens: int, seed: int = 7
) -> tuple[list[Level], list[EngineSummary]]:
    """A session of `compactions` x `turns_each` turns summarised as the worker does: each
    compaction's own summary, the chain of `earlier` summaries; the levels Assemble shows for
    the last compaction (the `earlier` of the oldest of the newest three, then those three)."""
    count = TokenCounter.for_model("", "o200k_base")
    messages = host_messages(generated_exchanges(compactions * turns_each // 2, seed=seed))
    turns = persisted(messages)
    own = [
        engine_summary_of(turns[i * turns_each : (i + 1) * turns_each], max_tokens=max_tokens, count=count)
        for i in range(compactions)
    ]
    earlier: list[EngineSummary | None] = [None]
    for index in range(1, compactions):
        parts = [p for p in (earlier[-1], own[index - 1]) if p is not None]
        earlier.append(summary_of_summaries(parts, max_tokens=max_tokens, count=count))
    oldest_shown = max(0, compactions - MAX_SUMMARY_CHECKPOINTS)
    shown = [s for s in (earlier[oldest_shown], *own[oldest_shown:]) if s is not None]
    names = ["earlier", *[f"checkpoint {i + 1}" for i in range(oldest_shown, compactions)]]
    if earlier[oldest_shown] is None:
        names = names[1:]
    levels = [
        Level(
            name, s.tokens, s.covers_turns, dict(s.kept_terms), {k: len(v) for k, v in s.source_terms.items()}
        )
        for name, s in zip(names, shown, strict=True)
    ]
    return levels, shown


def main() -> None:
    for compactions, turns_each, cap in ((1, 200, 200), (20, 100, 200), (20, 100, 400)):
        levels, _ = measured_levels(compactions, turns_each, cap)
        total = sum(level.tokens for level in levels)
        print(f"{compactions} compaction(s) x {turns_each} turns, cap {cap}: {total} summary tokens shown")
        for level in levels:
            shares = ", ".join(f"{k} {level.kept[k]}/{level.total[k]}" for k in ("names", "numbers", "dates"))
            print(
                f"  {level.name:>14}: {level.tokens:4d} tokens, {level.covers_turns:5d} turns; kept {shares}"
            )


if __name__ == "__main__":
    main()
