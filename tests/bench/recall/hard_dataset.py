"""The hard tier's generator: long, LoCoMo-like conversations between two people (seeded, no
third-party data).

Each conversation has `sessions` sessions days to weeks apart; the first speaker is replayed as
the user, the second as the assistant. A session opens and closes with small talk, carries a
couple of facts either speaker states about their life (tests.bench.recall.hard_catalog),
distractors in the questions' own words, a friend's news that changes later, and chatter naming
the same friends and pets over and over. Questions come in the kinds below; every one names its
gold evidence (the message texts that answer it) and none quotes the evidence's rare words.

- `single-hop`: one fact, asked in general words (a changed fact: its latest statement);
- `temporal`: when something happened, answerable only from the session's date;
- `multi-hop`: every fact of one kind one speaker stated, 2-3 turns from different sessions;
- `open-domain`: an inference from one stated fact;
- `adversarial`: a single-hop question about the other speaker, who never said it.

`python -m tests.bench.recall.hard_dataset --sessions 3` prints a sample.
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from tests.bench.recall import hard_catalog as catalog
from tests.bench.recall.dataset import Evidence, Exchange, Question, SessionScript, UserHistory

KINDS = ("single-hop", "temporal", "multi-hop", "open-domain", "adversarial")
SESSIONS = 26
EXCHANGES_PER_SESSION = 12
"""26 x 12 exchanges: 624 messages, the public benchmark's longest conversation is 681."""
FACTS_PER_SESSION = 2
DISTRACTORS_PER_SESSION = 3
MAX_PER_GATHER = 3
OWNER_SHARE = 0.9
"""Share of a fact kind's facts its owning speaker states."""


@dataclass
class Conversation(UserHistory):
    """A user's history as two named people talking: speakers[0] is the user."""

    speakers: tuple[str, str] = ("", "")

    def speaker(self, message_index: int) -> str:
        """Who said the exchange's message `message_index` (0: user, 1: assistant)."""
        return self.speakers[message_index % 2]


@dataclass(frozen=True)
class _Person:
    name: str
    nickname: str
    friends: tuple[str, ...]
    pet: str


@dataclass(frozen=True)
class _Stated:
    kind: catalog.FactKind
    speaker: int
    evidence: Evidence
    answer: str


class _Builder:
    """One conversation's sessions. A session is a sequence of lines, line `p` said by speaker
    `p % 2` (user, assistant, user, ...); a fact sits on a line of its speaker's parity."""

    def __init__(self, rng: random.Random, people: tuple[_Person, _Person]) -> None:
        self.rng = rng
        self.people = people
        self.scripts: list[SessionScript] = []
        self.stated: list[_Stated] = []
        self.updates: list[tuple[str, Evidence]] = []

    def fill(self, text: str, speaker: int, friend: str = "", x: str = "") -> str:
        """`text` from `speaker`'s side: `{me}` is the speaker, `{you}` the other."""
        me, you = self.people[speaker], self.people[1 - speaker]
        return text.format(
            me=me.nickname, you=you.nickname, friend=friend or self.rng.choice(me.friends), pet=me.pet, x=x
        )

    def filler(self, answering: bool, speaker: int) -> str:
        """Small talk: a reply to the chatter just said (sometimes with more), or new chatter."""
        rng = self.rng
        reply = self.fill(rng.choice(catalog.REPLIES), 1 - speaker)
        chatter = self.fill(rng.choice(catalog.CHATTER), speaker)
        if answering:
            return f"{reply} {chatter}" if rng.random() < 0.7 else reply
        return (
            chatter if rng.random() < 0.6 else f"{chatter} {self.fill(rng.choice(catalog.CHATTER), speaker)}"
        )

    def session(
        self, index: int, started: datetime, plan: list[_Planned], update: _Update | None
    ) -> SessionScript:
        rng = self.rng
        lines: list[str | None] = [None] * (2 * EXCHANGES_PER_SESSION)
        opener, closer = rng.choice(catalog.OPENERS), rng.choice(catalog.CLOSERS)
        lines[0], lines[1] = self.fill(opener[0], 0), self.fill(opener[1], 0)
        lines[-2], lines[-1] = self.fill(closer[0], 0), self.fill(closer[1], 0)
        for kind, x, answer, speaker in plan:
            friend = rng.choice(self.people[speaker].friends)
            line = self._place(lines, speaker, self.fill(rng.choice(kind.statements), speaker, friend, x))
            self.stated.append(_Stated(kind, speaker, Evidence(index, line // 2, str(lines[line])), answer))
        if update is not None:
            text, question, speaker = update
            line = self._place(lines, speaker, text)
            self.updates.append((question, Evidence(index, line // 2, text)))
        for _ in range(DISTRACTORS_PER_SESSION):
            kind, speaker = rng.choice(catalog.FACT_KINDS), rng.randrange(2)
            if self._room(lines, speaker):  # a crowded session has fewer distractors
                self._place(lines, speaker, self.fill(rng.choice(kind.distractors), speaker), catalog.REPLIES)
        answering = False  # the line before is chatter waiting for a reply
        for p, said in enumerate(lines):
            if said is None:
                lines[p] = self.filler(answering, p % 2)
            answering = said is None and not answering
        exchanges = [Exchange(str(lines[p]), str(lines[p + 1])) for p in range(0, len(lines), 2)]
        return SessionScript(f"s{index:02d}", started, exchanges)

    @staticmethod
    def _room(lines: list[str | None], speaker: int) -> list[int]:
        """Free lines of `speaker`'s (between opener and closer) with a free line after them."""
        return [
            p
            for p in range(2, len(lines) - 3)
            if p % 2 == speaker and lines[p] is None and lines[p + 1] is None
        ]

    def _place(
        self, lines: list[str | None], speaker: int, text: str, answers: tuple[str, ...] = catalog.REACTIONS
    ) -> int:
        """Put `text` on a free line of `speaker`'s, the other's answer on the line after it."""
        line = self.rng.choice(self._room(lines, speaker))
        lines[line] = text
        lines[line + 1] = self.fill(self.rng.choice(answers), speaker)
        return line


_Planned = tuple[catalog.FactKind, str, str, int]
_Update = tuple[str, str, int]


def _people(rng: random.Random) -> tuple[_Person, _Person]:
    (a, a_nick), (b, b_nick) = rng.sample(catalog.SPEAKERS, 2)
    friends = rng.sample(catalog.FRIENDS, 6)
    pets = rng.sample(catalog.PETS, 2)
    return _Person(a, a_nick, tuple(friends[:3]), pets[0]), _Person(b, b_nick, tuple(friends[3:]), pets[1])


def _fact_plan(rng: random.Random, facts: int) -> list[_Planned]:
    """(kind, specific value, answer, speaker) for each fact; no value twice, and the kinds taken
    in turn so that a session's facts are of different kinds. Each kind mostly belongs to one
    speaker (as in life: one of them plays music), so some are the other's never."""
    owner = {kind.name: rng.randrange(2) for kind in catalog.FACT_KINDS}
    values = {kind.name: rng.sample(kind.values, len(kind.values)) for kind in catalog.FACT_KINDS}
    kinds = rng.sample(catalog.FACT_KINDS, len(catalog.FACT_KINDS))
    plan: list[_Planned] = []
    for round_ in range(max(len(kind.values) for kind in kinds)):
        for kind in kinds:
            if round_ < len(values[kind.name]):
                x, answer = values[kind.name][round_]
                speaker = owner[kind.name] if rng.random() < OWNER_SHARE else 1 - owner[kind.name]
                plan.append((kind, x, answer, speaker))
    return plan[:facts]


def _updates(builder: _Builder, sessions: int) -> dict[int, _Update]:
    """Which session tells which part of a changing fact: first and second telling sessions apart."""
    rng = builder.rng
    planned: dict[int, _Update] = {}
    free = list(range(sessions))
    rng.shuffle(free)
    for before, after, question, _answer in catalog.UPDATES:
        if len(free) < 2:
            break
        first, second = sorted((free.pop(), free.pop()))
        speaker = rng.randrange(2)
        friend = rng.choice(builder.people[speaker].friends)
        planned[first] = (builder.fill(before, speaker, friend), "", speaker)
        planned[second] = (builder.fill(after, speaker, friend), question.format(friend=friend), speaker)
    return planned


def _conversation(rng: random.Random, user_index: int, sessions: int) -> Conversation:
    people = _people(rng)
    builder = _Builder(rng, people)
    plan = _fact_plan(rng, FACTS_PER_SESSION * sessions)
    updates = _updates(builder, sessions)
    when = datetime(2025, 3, 3, 9, 0, tzinfo=UTC) + timedelta(days=11 * user_index)
    for s in range(sessions):
        when += timedelta(days=rng.randint(3, 16), hours=rng.randint(0, 10), minutes=rng.randint(0, 59))
        facts = plan[FACTS_PER_SESSION * s : FACTS_PER_SESSION * (s + 1)]
        builder.scripts.append(builder.session(s, when, facts, updates.get(s)))
    names = (people[0].name, people[1].name)
    return Conversation(
        f"bench-hard-u{user_index}", builder.scripts, _questions(builder, names), speakers=names
    )


def _questions(builder: _Builder, names: tuple[str, str]) -> list[Question]:
    scripts = builder.scripts
    questions: list[Question] = []
    groups: dict[tuple[str, int], list[_Stated]] = defaultdict(list)
    for fact in builder.stated:
        groups[(fact.kind.name, fact.speaker)].append(fact)
        me = names[fact.speaker]
        questions.append(
            Question("single-hop", fact.kind.question.format(me=me), fact.answer, (fact.evidence,))
        )
    for question, evidence in builder.updates:
        if question:
            questions.append(Question("single-hop", question, evidence.text, (evidence,)))
    for (_, speaker), facts in groups.items():
        kind, me, first, latest = facts[0].kind, names[speaker], facts[0], facts[-1]
        if len(facts) == 1:
            questions.append(_temporal(scripts, f"When did {me} {kind.event}?", first))
        else:
            questions.append(_temporal(scripts, f"When did {me} initially {kind.event}?", first))
            questions.append(_temporal(scripts, f"When did {me} most recently {kind.event}?", latest))
            gathered = facts[:MAX_PER_GATHER]
            answer = "; ".join(f.answer for f in gathered)
            questions.append(
                Question("multi-hop", kind.gather.format(me=me), answer, tuple(f.evidence for f in gathered))
            )
        # The trait shows from the first time it was mentioned.
        questions.append(Question("open-domain", kind.inference.format(me=me), "yes", (first.evidence,)))
        if (kind.name, 1 - speaker) not in groups:
            other = names[1 - speaker]
            questions.append(
                Question(
                    "adversarial", kind.question.format(me=other), f"not {other}: {me}", (latest.evidence,)
                )
            )
    return questions


def _temporal(scripts: list[SessionScript], text: str, fact: _Stated) -> Question:
    """A "when" question: the answer is the date of the session the fact was told in."""
    return Question(
        "temporal", text, scripts[fact.evidence.session].started.date().isoformat(), (fact.evidence,)
    )


def generate_hard(*, seed: int, users: int, sessions: int = SESSIONS) -> list[Conversation]:
    rng = random.Random(seed)
    return [_conversation(rng, u, sessions) for u in range(users)]


def asked_by_nickname(conversations: list[Conversation]) -> list[Conversation]:
    """The same conversations with every question naming a speaker by the nickname the
    conversation itself uses, in its greetings and replies ("Thanks, Caro!"), instead of a full
    name it never says: a name the history knows, but never alongside what is asked."""
    nicknames = dict(catalog.SPEAKERS)
    out = []
    for conversation in conversations:
        questions = []
        for question in conversation.questions:
            text = question.text
            for name in conversation.speakers:
                text = text.replace(name, nicknames[name])
            questions.append(replace(question, text=text))
        out.append(replace(conversation, questions=questions))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    (conversation,) = generate_hard(seed=args.seed, users=1, sessions=args.sessions)
    first, second = conversation.speakers
    for script in conversation.sessions:
        print(f"== {script.session_id} {script.started:%Y-%m-%d %H:%M}")
        for exchange in script.exchanges:
            print(f"  {first}: {exchange.user}\n  {second}: {exchange.assistant}")
    for question in conversation.questions:
        print(f"Q[{question.kind}] {question.text} -> {question.answer}")


if __name__ == "__main__":
    main()
