"""A generated, seeded long-conversation recall benchmark (no third-party conversation data).

Each user talks to the agent over `sessions` sessions spread across simulated weeks. Every
session mixes small talk and work chatter with a few *facts* the user states once (a relocation,
a pet, an allergy, a ticket number, ...) and *distractors* of the same shape about other people.
After the last session the user asks questions whose wording differs from the turns that answer
them (synonyms, paraphrase, pronouns), of four kinds:

- `paraphrase`: one fact, asked in other words;
- `temporal`: when a fact was said (answerable only from the turn's date);
- `multi`: two facts from different sessions;
- `exact`: names, numbers and ids (ticket numbers, hosts, codes).

Every question names its gold evidence: the user turns that answer it.

`python -m tests.bench.recall.dataset --users 1 --sessions 3` prints a sample.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

FIRST_NAMES = (
    "Priya", "Tomasz", "Aiko", "Mateo", "Fatima", "Oskar", "Leilani", "Dmitri", "Noor", "Caetano",
    "Ingrid", "Kwame", "Marisol", "Henrik", "Yusuf", "Saoirse", "Rafael", "Mei", "Anouk", "Bashir",
    "Elodie", "Tariq", "Greta", "Ravi", "Zofia", "Emeka", "Linnea", "Hiroshi", "Valentina", "Arjun",
)  # fmt: skip
CITIES = (
    "Lisbon", "Montreal", "Osaka", "Tallinn", "Valparaiso", "Nairobi", "Porto", "Reykjavik",
    "Wellington", "Ljubljana", "Cartagena", "Hanoi", "Tbilisi", "Bergen", "Adelaide", "Kraków",
)  # fmt: skip
RELATIVES = ("sister", "brother", "cousin", "aunt", "uncle", "best friend", "roommate", "neighbour")
RELATIVE_SYNONYMS = {
    "sister": "sibling", "brother": "sibling", "cousin": "relative", "aunt": "relative",
    "uncle": "relative", "best friend": "closest friend", "roommate": "flatmate", "neighbour": "neighbor",
}  # fmt: skip
PETS = (
    ("beagle puppy", "dog"), ("tabby kitten", "cat"), ("green iguana", "lizard"),
    ("border collie", "dog"), ("cockatiel", "bird"), ("dwarf rabbit", "bunny"),
)  # fmt: skip
PET_NAMES = ("Biscuit", "Mochi", "Pepper", "Juniper", "Ziggy", "Tofu", "Clementine", "Rascal", "Nimbus")
FOODS = (
    ("shellfish", "seafood like shrimp"), ("peanuts", "nuts"), ("gluten", "bread and pasta"),
    ("sesame", "seeds"), ("dairy", "milk products"), ("kiwi", "certain fruit"),
)  # fmt: skip
CARS = ("Subaru Outback", "Volvo XC40", "Kia Niro", "Mazda CX-30", "Skoda Octavia", "Honda Civic")
COLOURS = ("dark blue", "silver", "forest green", "matte grey", "burgundy", "white")
HOBBIES = (
    ("pottery", "ceramics"), ("salsa dancing", "dance"), ("bouldering", "climbing"),
    ("cello", "music"), ("judo", "martial arts"), ("watercolour painting", "art"),
)  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
SYSTEMS = (
    "payments", "search", "checkout", "billing", "auth", "inventory", "notifications", "reporting",
)  # fmt: skip
TEAMS = ("platform", "data infrastructure", "mobile", "security", "growth", "developer tooling")
BOOKS = (
    ("The Quiet Orchard", "Hallvard Lien"), ("Salt and Meridian", "Odile Faure"),
    ("A Map of Small Rivers", "Tunde Okafor"), ("Glass Harbour", "Mirela Dan"),
    ("The Ninth Lantern", "Keiko Arai"), ("Winter Ledger", "Paulo Reis"),
)  # fmt: skip
TOPICS = (
    "the sprint retro", "a flaky integration test", "the quarterly planning doc", "a slow SQL query",
    "the weekend hike", "a new coffee grinder", "the team offsite", "a Kubernetes upgrade",
    "the garden beds", "a podcast episode", "the migration to Python 3.12", "a birthday dinner",
    "the on-call rotation", "a React rendering bug", "the marathon training plan", "a tax form",
    # Near misses: the questions' vocabulary in chatter that answers none of them.
    "the city council's new parking rules", "renting a car for the conference", "the dog park rules",
    "our book club's next pick", "which team owns the flaky dashboard", "the staging database backups",
    "an incident review template", "the gym's new opening hours", "a music festival lineup",
    "moving apartments someday", "the shelter's volunteer schedule", "a dentist appointment",
)  # fmt: skip
SMALL_TALK = (
    "Can you help me think through {topic}? I keep going back and forth on it.",
    "Quick one about {topic}: what would you check first?",
    "I spent most of the morning on {topic} and I'm a bit stuck.",
    "Remind me to look at {topic} again later this week.",
    "Do you have any tips for {topic}? Nothing urgent.",
    "Let's brainstorm a little about {topic} before lunch.",
)  # fmt: skip
ANSWERS = (
    "Sure. For {topic}, start by writing down what you already know, then narrow it to one change. "
    "Once that is clear, compare it with what happened last time and keep notes as you go.",
    "Good question. With {topic} I would look at the most recent change first and compare. If "
    "nothing stands out, widen the window a little and check the assumptions one by one.",
    "Happy to help with {topic}. Break it into two smaller steps and tackle the riskier one first, "
    "then decide whether the second step is still needed at all.",
    "Noted. For {topic}, a short checklist usually helps; I can draft one if you like, with the "
    "open questions at the top so nobody forgets them.",
)  # fmt: skip

KINDS = ("paraphrase", "temporal", "multi", "exact")
DISTRACTORS_PER_SESSION = 4
"""Statements shaped like facts, about someone else (same names, same words), never asked about."""


@dataclass(frozen=True)
class Exchange:
    """One user message and the assistant's answer."""

    user: str
    assistant: str


@dataclass
class SessionScript:
    session_id: str
    started: datetime
    exchanges: list[Exchange] = field(default_factory=list)

    def timestamp(self, exchange_index: int) -> datetime:
        """When the exchange happened: sessions last about an hour, four minutes per exchange."""
        return self.started + timedelta(minutes=4 * exchange_index)


@dataclass(frozen=True)
class Evidence:
    """A gold user turn: session index, exchange index, and its exact text."""

    session: int
    exchange: int
    text: str


@dataclass(frozen=True)
class Question:
    kind: str
    text: str
    answer: str
    evidence: tuple[Evidence, ...]


@dataclass
class UserHistory:
    user_id: str
    sessions: list[SessionScript]
    questions: list[Question]


@dataclass(frozen=True)
class _Fact:
    """A statement and the questions it can answer (paraphrased, exact-token)."""

    statement: str
    question: str
    answer: str
    kind: str
    """`paraphrase` or `exact`."""
    event: str
    """A short paraphrase of what happened, for temporal and multi-fact questions."""


def _relocation(rng: random.Random, name: str) -> _Fact:
    relative = rng.choice(RELATIVES)
    city = rng.choice(CITIES)
    return _Fact(
        f"Big news: my {relative} {name} just moved to {city} for a new job, the flat there is tiny.",
        f"Which city is my {RELATIVE_SYNONYMS[relative]} {name} living in now?",
        city,
        "paraphrase",
        f"{name} relocated",
    )


def _pet(rng: random.Random, name: str) -> _Fact:
    pet, kind = rng.choice(PETS)
    name = rng.choice(PET_NAMES)
    return _Fact(
        f"We adopted a {pet} from the shelter over the weekend and named it {name}.",
        f"What did we call the {kind} we brought home from the rescue?",
        name,
        "paraphrase",
        f"we got {name} the {kind}",
    )


def _allergy(rng: random.Random, name: str) -> _Fact:
    food, hint = rng.choice(FOODS)
    return _Fact(
        f"The doctor confirmed I'm allergic to {food}, so {name} is changing the menu for the party.",
        f"Is there some food I'm supposed to avoid for health reasons, maybe {hint}?",
        food,
        "paraphrase",
        "the allergy diagnosis",
    )


def _car(rng: random.Random, name: str) -> _Fact:
    car, colour = rng.choice(CARS), rng.choice(COLOURS)
    return _Fact(
        f"I finally picked up the {colour} {car} today, {name} helped me negotiate the trade-in.",
        "What vehicle did I end up purchasing, and what colour is it?",
        f"{colour} {car}",
        "paraphrase",
        "the car purchase",
    )


def _hobby(rng: random.Random, name: str) -> _Fact:
    (hobby, area), day = rng.choice(HOBBIES), rng.choice(WEEKDAYS)
    return _Fact(
        f"I signed up for {hobby} lessons with {name}, every {day} evening from next week.",
        f"On which weekday do I have my {area} class?",
        day,
        "paraphrase",
        f"signing up for {area} lessons",
    )


def _manager(rng: random.Random, name: str) -> _Fact:
    team = rng.choice(TEAMS)
    return _Fact(
        f"{name}, my manager, approved my transfer to the {team} team this morning.",
        f"Who gave the green light for me to join {team}?",
        name,
        "paraphrase",
        f"the move to {team}",
    )


def _book(rng: random.Random, name: str) -> _Fact:
    title, author = rng.choice(BOOKS)
    return _Fact(
        f"{name} lent me {title} by {author}; I'm about halfway through it.",
        f"Who is the author of the novel {name} gave me to borrow?",
        author,
        "paraphrase",
        f"borrowing a novel from {name}",
    )


def _ticket(rng: random.Random, name: str) -> _Fact:
    system = rng.choice(SYSTEMS)
    ticket = f"INC-{rng.randint(10000, 99999)}"
    return _Fact(
        f"{name} opened {ticket} for the {system} outage, please keep that number handy.",
        f"What's the incident reference for when {system} went down?",
        ticket,
        "exact",
        f"when {system} went down",
    )


def _host(rng: random.Random, name: str) -> _Fact:
    system = rng.choice(SYSTEMS)
    host = f"db-{system[:4]}-{rng.randint(10, 99)}.staging.internal"
    return _Fact(
        f"The staging database for {system} now lives on {host}, {name} migrated it.",
        f"Which machine hosts the {system} staging DB at the moment?",
        host,
        "exact",
        f"moving the {system} DB to a new machine",
    )


def _code(rng: random.Random, name: str) -> _Fact:
    code = f"{rng.randint(1000, 9999)}"
    place = rng.choice(("gym locker", "bike lock", "storage unit", "office safe"))
    return _Fact(
        f"Note to self: the {place} combination is {code}, {name} set it up.",
        f"What are the digits to open my {place}?",
        code,
        "exact",
        f"setting the {place} code",
    )


_FACT_MAKERS: tuple[Callable[[random.Random, str], _Fact], ...] = (
    _relocation, _pet, _allergy, _car, _hobby, _manager, _book, _ticket, _host, _code,
)  # fmt: skip


def _small_talk(rng: random.Random) -> Exchange:
    topic = rng.choice(TOPICS)
    return Exchange(rng.choice(SMALL_TALK).format(topic=topic), rng.choice(ANSWERS).format(topic=topic))


def _ack(fact: _Fact) -> str:
    return f"Thanks for telling me, I'll keep that in mind about {fact.event}."


@dataclass
class _Planted:
    fact: _Fact
    evidence: Evidence


def _user_history(
    rng: random.Random, user_index: int, sessions: int, exchanges: int, facts_per_session: int
) -> UserHistory:
    user_id = f"bench-recall-u{user_index}"
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC) + timedelta(days=3 * user_index)
    names = list(FIRST_NAMES)
    rng.shuffle(names)
    planted: list[_Planted] = []
    scripts: list[SessionScript] = []
    day = start
    for s in range(sessions):
        day += timedelta(days=rng.randint(2, 5), hours=rng.randint(0, 8))
        script = SessionScript(f"s{s:02d}", day)
        slots = rng.sample(range(exchanges), facts_per_session + DISTRACTORS_PER_SESSION)
        fact_slots, distractor_slots = slots[:facts_per_session], slots[facts_per_session:]
        for e in range(exchanges):
            if e in fact_slots:
                fact = _new_fact(rng, names[len(planted) % len(names)], planted)
                planted.append(_Planted(fact, Evidence(s, e, fact.statement)))
                script.exchanges.append(Exchange(fact.statement, _ack(fact)))
            elif e in distractor_slots:
                # Same shape as a fact, about someone else's life: never asked about.
                other = rng.choice(_FACT_MAKERS)(rng, rng.choice(names))
                text = f"Unrelated, but my colleague told me: {other.statement.replace('my ', 'their ')}"
                script.exchanges.append(Exchange(text, "Interesting, thanks for sharing."))
            else:
                script.exchanges.append(_small_talk(rng))
        scripts.append(script)
    return UserHistory(user_id, scripts, _questions(rng, planted, scripts))


def _new_fact(rng: random.Random, name: str, planted: list[_Planted]) -> _Fact:
    """A fact whose question and event differ from every earlier one (so each has one answer)."""
    while True:
        fact = rng.choice(_FACT_MAKERS)(rng, name)
        if all(p.fact.question != fact.question and p.fact.event != fact.event for p in planted):
            return fact


def _questions(rng: random.Random, planted: list[_Planted], scripts: list[SessionScript]) -> list[Question]:
    questions: list[Question] = []
    for p in planted:
        questions.append(Question(p.fact.kind, p.fact.question, p.fact.answer, (p.evidence,)))
    for p in rng.sample(planted, len(planted) // 2):
        when = scripts[p.evidence.session].timestamp(p.evidence.exchange)
        questions.append(
            Question(
                "temporal",
                f"On what date did we talk about {p.fact.event}?",
                when.date().isoformat(),
                (p.evidence,),
            )
        )
    pairs = [
        (a, b) for a, b in zip(planted, planted[3:], strict=False) if a.evidence.session != b.evidence.session
    ]
    for a, b in rng.sample(pairs, len(pairs) // 3):
        first = a if a.evidence.session < b.evidence.session else b
        questions.append(
            Question(
                "multi",
                f"Which came first: {a.fact.event}, or {b.fact.event}?",
                first.fact.event,
                (a.evidence, b.evidence),
            )
        )
    return questions


def generate(
    *, seed: int, users: int, sessions: int, exchanges: int = 20, facts_per_session: int = 3
) -> list[UserHistory]:
    rng = random.Random(seed)
    return [_user_history(rng, u, sessions, exchanges, facts_per_session) for u in range(users)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    for history in generate(seed=args.seed, users=args.users, sessions=args.sessions):
        for script in history.sessions:
            print(f"== {history.user_id} {script.session_id} {script.started:%Y-%m-%d %H:%M}")
            for exchange in script.exchanges:
                print(f"  U: {exchange.user}\n  A: {exchange.assistant}")
        for question in history.questions:
            print(f"Q[{question.kind}] {question.text} -> {question.answer}")


if __name__ == "__main__":
    main()
