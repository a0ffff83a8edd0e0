"""The hard tier's vocabulary: the people, recurring things, facts and chatter its conversations
are made of (tests.bench.recall.hard_dataset assembles them).

A fact's statement names specific, rare things (a breed, a town, an instrument); its questions
ask with general words ("what kind of animal", "which instrument") and share at most a common
word of its kind with it ("shelter", "trip", "lessons"; for half of the kinds, with only one of
the two ways to state it), a word the kind's other statements and
its *distractors* also use: the question's own vocabulary, said of nothing in particular ("I
really need a trip somewhere"). So a matching word narrows a question to a few dozen turns
without pointing at the evidence, as in public long-conversation benchmarks.

Placeholders: `{me}` the speaker who states the fact, `{you}` the other speaker, `{friend}` a
friend of the speaker, `{pet}` the speaker's pet, `{x}` the fact's specific value.
"""

from __future__ import annotations

from dataclasses import dataclass

SPEAKERS = (
    ("Melanie", "Mel"), ("Jonah", "Jo"), ("Caroline", "Caro"), ("Deborah", "Deb"), ("Nathaniel", "Nate"),
    ("Gabriela", "Gabi"), ("Theodore", "Theo"), ("Josephine", "Josie"), ("Benedict", "Ben"),
    ("Evangeline", "Evie"),
)  # fmt: skip
FRIENDS = (
    "Dana", "Marcus", "Priya", "Tomas", "Aiko", "Rosa", "Felix", "Hana", "Omar", "Lucia", "Sven",
    "Nadia", "Kofi", "Ines", "Yuki", "Bruno",
)  # fmt: skip
PETS = ("Oscar", "Luna", "Pickle", "Waffles", "Maple", "Ziggy", "Bean", "Nova")


@dataclass(frozen=True)
class FactKind:
    """One kind of fact a speaker states about their own life, with the questions it answers."""

    name: str
    values: tuple[tuple[str, str], ...]
    """(the rare specific thing said, the answer a reader gives) pairs."""
    statements: tuple[str, ...]
    """How a speaker says it (`{x}` is the specific thing); the evidence turn."""
    question: str
    """Single-hop, in general words."""
    event: str
    """The happening in general words, for "When did ..." questions."""
    inference: str
    """An open-domain question answerable by inference from the fact."""
    gather: str
    """A multi-hop question over every fact of this kind one speaker stated."""
    distractors: tuple[str, ...]
    """Chatter in the question's words that answers nothing."""


FACT_KINDS = (
    FactKind(
        "pet",
        (
            ("beagle", "a dog"),
            ("ragdoll kitten", "a cat"),
            ("cockatiel", "a bird"),
            ("holland lop", "a rabbit"),
            ("bearded dragon", "a lizard"),
            ("greyhound", "a dog"),
        ),
        (
            "Guess what, we finally brought home a {x} from the shelter on Saturday! {friend} drove us "
            "there and the kids cried the whole way back, happy tears.",
            "So we did it, we adopted a {x}. The shelter lady said nobody had asked about it for months, "
            "which broke my heart a little.",
        ),
        "What kind of animal did {me} get from the shelter?",
        "take in an animal from the shelter",
        "Would {me} be likely to support a shelter fundraiser?",
        "Which animals has {me} got from the shelter over time?",
        (
            "We keep talking about getting an animal, but our landlord is strict about it.",
            "The shelter near us posted a bunch of animals this week, I scrolled for an hour.",
        ),
    ),
    FactKind(
        "trip",
        (
            ("Lofoten", "northern Norway"),
            ("Oaxaca", "southern Mexico"),
            ("Hokkaido", "northern Japan"),
            ("the Dolomites", "the Italian mountains"),
            ("Tasmania", "an Australian island"),
            ("Patagonia", "southern Chile"),
            ("the Azores", "Portuguese islands"),
        ),
        (
            "We just got back from our trip to {x}! {friend} planned everything, we hiked until our legs "
            "gave out and ate way too much street food.",
            "I'm still jet-lagged from {x}, honestly. Ten days, two rented cars, one flat tyre, and "
            "{friend} lost her passport for about an hour.",
        ),
        "Where did {me} go on the recent trip?",
        "go away on a trip",
        "Would {me} be comfortable with a long trip abroad?",
        "Which places has {me} been to on a trip this year?",
        (
            "I really need a trip somewhere, work has been relentless.",
            "Have you ever thought about where you'd travel if money didn't matter?",
        ),
    ),
    FactKind(
        "instrument",
        (
            ("cello", "the cello"),
            ("banjo", "the banjo"),
            ("ukulele", "the ukulele"),
            ("saxophone", "the saxophone"),
            ("harmonica", "the harmonica"),
            ("accordion", "the accordion"),
        ),
        (
            "I started {x} lessons on Thursday evenings, my teacher is patient but my fingers hurt "
            "like crazy. {friend} says I sound like a cat on a fence.",
            "Don't laugh, but I bought a secondhand {x} off a neighbour and I've been practising scales "
            "every night after dinner.",
        ),
        "Which instrument is {me} taking lessons for?",
        "start music lessons",
        "Does {me} probably have some musical talent or interest?",
        "What musical instruments has {me} tried over the months?",
        (
            "Music always cheers me up, I put a playlist on while cooking.",
            "My nephew wants lessons for some instrument and I have no idea what to suggest.",
        ),
    ),
    FactKind(
        "job",
        (
            ("a veterinary clinic", "at a vet clinic"),
            ("a solar panel startup", "at a solar company"),
            ("the city library", "at the library"),
            ("a bakery on Elm Street", "at a bakery"),
            ("a children's hospital", "at a hospital"),
            ("an architecture firm", "at an architects' office"),
        ),
        (
            "Big news on my end: I accepted the job offer from {x}! I start in two weeks and {friend} "
            "already made me a good-luck card.",
            "I handed in my notice yesterday. Starting at {x} next month, the commute is longer but the "
            "people there seem lovely.",
        ),
        "Where is the new job {me} took?",
        "take a new job",
        "Is {me} someone who is open to changing job?",
        "Which places has {me} taken a job at?",
        (
            "Work is work, you know? Some weeks I wonder about a new job.",
            "My boss keeps hinting at a reorganisation, everyone is nervous about their positions.",
        ),
    ),
    FactKind(
        "race",
        (
            ("a half marathon", "a half marathon"),
            ("a 10k charity run", "a charity run"),
            ("an open-water swim", "a swim race"),
            ("a sprint triathlon", "a triathlon"),
            ("a 100-mile bike ride", "a cycling event"),
        ),
        (
            "I did it, I finished {x} this morning, my first race in years! My knees are complaining and "
            "{friend} had to practically carry me to the car, but I'm so proud.",
            "Signed up for {x} in the autumn, and I've been training at dawn before work. {friend} "
            "is holding me accountable.",
        ),
        "What race did {me} take part in?",
        "take part in a race",
        "Is {me} likely to care about physical fitness?",
        "Which race events has {me} done or planned?",
        (
            "I keep promising myself I'll sign up for a race, then the week gets away from me.",
            "Sports on TV count as endurance, right? Sitting through a whole game is hard work.",
        ),
    ),
    FactKind(
        "book",
        (
            ("Middlemarch", "Middlemarch"),
            ("The Left Hand of Darkness", "The Left Hand of Darkness"),
            ("Piranesi", "Piranesi"),
            ("Beloved", "Beloved"),
            ("Stoner", "Stoner"),
            ("Kindred", "Kindred"),
        ),
        (
            "I finally finished reading {x} last night and I cried at the ending. {friend} recommended it "
            "ages ago and I should have listened sooner.",
            "My reading group picked {x} for this month, I'm halfway through and can't put it down.",
        ),
        "Which book has {me} been reading?",
        "finish reading a book",
        "Does {me} enjoy reading?",
        "Which books has {me} talked about reading?",
        (
            "I wish I had more time for reading, I mostly skim news on my phone now.",
            "Any novel recommendations? Something that isn't too long.",
        ),
    ),
    FactKind(
        "move",
        (
            ("a flat above a flower shop", "above a flower shop"),
            ("a cottage near the river", "by the river"),
            ("a loft in the old mill", "in a converted mill"),
            ("a townhouse on Baker Lane", "on Baker Lane"),
            ("a bungalow by the park", "next to a park"),
        ),
        (
            "We signed the lease on {x}! Boxes everywhere, {friend} helped us carry the sofa up and we "
            "ordered pizza on the floor.",
            "Moving day is done, we're in {x} now. The kitchen is tiny but the light in the mornings is "
            "unbelievable.",
        ),
        "Where did {me} end up after moving?",
        "finish moving",
        "Did {me} go through a big life change recently?",
        "Which places has {me} been moving to over this time?",
        (
            "Housing prices are insane, I don't know how anyone affords moving these days.",
            "Our neighbourhood is changing so fast, new cafes every month.",
        ),
    ),
    FactKind(
        "craft",
        (
            ("pottery", "pottery"),
            ("woodturning", "woodturning"),
            ("stained glass", "stained glass"),
            ("quilting", "quilting"),
            ("bookbinding", "bookbinding"),
            ("candle making", "candle making"),
        ),
        (
            "I took a {x} workshop at the community centre with {friend}, and my first piece came out "
            "wonky but I'm weirdly proud of it.",
            "New obsession: {x}. I've turned half the garage into a workshop and my hands are a mess.",
        ),
        "Which craft does {me} practise in the workshop?",
        "go to a craft workshop",
        "Would {me} enjoy a handmade gift?",
        "Which crafts has {me} tried in the workshop?",
        (
            "I'm hopeless with my hands, I can't even hang a picture straight.",
            "The kids want a craft workshop this weekend, any ideas that won't wreck the house?",
        ),
    ),
    FactKind(
        "allergy",
        (
            ("shellfish", "shellfish"),
            ("peanuts", "peanuts"),
            ("penicillin", "penicillin"),
            ("bee stings", "bee stings"),
            ("sesame", "sesame"),
            ("latex", "latex"),
        ),
        (
            "Scary week: turns out I have an allergy to {x}. I swelled up at dinner and {friend} had to "
            "drive me to urgent care.",
            "The doctor ran some tests and confirmed the allergy to {x}, so I carry an injector "
            "now. {friend} knows where it is.",
        ),
        "What allergy does {me} have?",
        "find out about the allergy",
        "Should friends be careful when cooking for {me}?",
        "Which allergy has {me} mentioned?",
        (
            "Health stuff is so stressful, I avoid going to the doctor if I can.",
            "I read an article about food allergy labels, kind of terrifying.",
        ),
    ),
    FactKind(
        "volunteer",
        (
            ("the food bank", "a food bank"),
            ("a youth mentoring programme", "mentoring teenagers"),
            ("the animal shelter's weekend shift", "an animal shelter"),
            ("a literacy tutoring group", "tutoring reading"),
            ("the coastal clean-up crew", "beach clean-ups"),
        ),
        (
            "I started volunteering with {x} on Sundays. {friend} got me into it and honestly it's "
            "the best part of my week.",
            "Spent the whole afternoon volunteering with {x} again, we sorted donations until the light "
            "went.",
        ),
        "Where does {me} go volunteering?",
        "start volunteering",
        "Does {me} care about giving back to the community?",
        "Where has {me} been volunteering?",
        (
            "I keep meaning to go volunteering, maybe next year.",
            "Our office has an unpaid community day, but it's always on a Friday when I'm busiest.",
        ),
    ),
)
"""Ten kinds; a conversation states each value at most once."""

UPDATES = (
    ("{friend} moved to Rotterdam for the new job, she sends me photos of canals every morning.",
     "{friend} just packed up again, she's in Valencia now. Third move in two years!",
     "Which city does {friend} live in these days?", "Valencia"),
    ("{friend} got a scooter to get to work, she says it's the only way around the traffic.",
     "{friend} sold the scooter and bought a cargo bike, she's converted everyone at her office.",
     "How does {friend} get to work at the moment?", "a cargo bike"),
    ("{friend} is dating a guy called Ruben who plays in a jazz trio.",
     "{friend} and Ruben split up, and now she's seeing a paramedic named Idris.",
     "Who is {friend} in a relationship with now?", "Idris, a paramedic"),
)  # fmt: skip
"""Facts that change: a friend's news told twice, sessions apart; only the later one answers."""

OPENERS = (
    ("Hey {you}! Long time, how have you been?", "Hi {me}! Good, busy as always. What's new with you?"),
    ("Morning {you}, got a minute?", "Always for you, {me}. How was your week?"),
    ("{you}! I've been meaning to message you all week.", "Ha, same here {me}. Tell me everything."),
    ("Hi {you}, hope the weekend treated you well.", "It did, thanks {me}! Yours?"),
)  # fmt: skip
CLOSERS = (
    ("Great chatting with you, {you}!", "Thanks, {me} — talk soon!"),
    ("Okay, I need to run. Say hi to everyone for me.", "Will do! Take care, {me}."),
    ("Let's catch up again soon, this was fun.", "Definitely. Bye {me}!"),
    ("Anyway, I should get dinner started. Speak soon!", "Enjoy your evening, {me}!"),
)  # fmt: skip
REACTIONS = (
    "Wow, that's amazing, {me}! How did {friend} take it?",
    "No way! I'm so happy for you. You have to tell me more next time.",
    "That's huge, {me}. I remember you talking about wanting something like that.",
    "Oh I love that. {friend} must be thrilled too.",
    "Honestly that sounds wonderful. How are you feeling about it all?",
)  # fmt: skip
CHATTER = (
    "How's {pet} doing these days? Still stealing socks?",
    "{friend} says hi, by the way. We grabbed coffee on Tuesday and talked about you.",
    "I saw {friend} at the market, she looked really well.",
    "{pet} has been so clingy lately, I think the weather is getting to everyone.",
    "Work has been a lot, but nothing interesting to report, just meetings and more meetings.",
    "I binge-watched a whole season of a cooking show last night instead of sleeping.",
    "The weather has been so grey, I can't wait for some sunshine.",
    "We had a lazy weekend, mostly board games and takeaway.",
    "I'm trying to drink less coffee. It's going terribly.",
    "Did I tell you {friend} is thinking of getting a dog? She keeps sending me puppy videos.",
    # The facts' common words in passing, so none of them points at a fact alone.
    "Did you catch the race on TV? {friend} was yelling at the screen the whole time.",
    "The shelter down the road is collecting old blankets, I dropped a bag off.",
    "{friend} is planning a trip with her parents and it's already a saga.",
    "The kids have swimming lessons on Wednesdays now, so dinner is chaos.",
    "{friend} is stressed about her job again, the usual.",
    "I'm reading the news less these days, it's better for my sleep.",
    "Our neighbours are moving out, the street will feel strange without them.",
    "There's a workshop on tax returns at the library, riveting stuff.",
    "{friend}'s hay fever allergy is back with a vengeance this week.",
    "The school is asking parents about volunteering at the fair again.",
    "My mum called for an hour yesterday, mostly about the neighbours.",
    "I finally cleaned out the fridge. We don't talk about what I found.",
)  # fmt: skip
REPLIES = (
    "Haha, that sounds about right. Same here, honestly.",
    "Oh nice, tell {friend} I said hi!",
    "Ugh, I feel that. This time of year is always hectic.",
    "Ha! {pet} is a character, I swear.",
    "That made me laugh. Thanks for sharing, {me}.",
    "Totally. Let's plan something fun soon to make up for it.",
    "Good for you. I should do the same, really.",
    "Aw. Give {pet} a scratch behind the ears from me.",
)  # fmt: skip
