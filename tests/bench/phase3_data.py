"""Generated workloads of the Phase-3 benchmark (`tests.bench.phase3`), seeded and deterministic.

- Skills: `OBJECTS` x `ACTIONS` (200 at full size), each with a SKILL.md-shaped name, description
  and body; a task asks for one skill's job in other words (synonyms of its action and object, a
  sentence frame), so a name match alone does not find it.
- Chit-chat: small talk that asks for no skill, greetings and acknowledgements among it.
- Tool cases: a tool failed with an error for one argument shape, then worked with another; the
  next prompt names the tool (or the newest messages call it).
- A mixed prompt stream: prompts that need recall (questions about facts, tasks) and prompts that
  do not (greetings, acknowledgements, follow-ups the newest answer answers).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

OBJECTS = (
    ("pdf", "PDF document", ("PDF", "PDF file", "pdf document")),
    ("csv", "CSV file", ("CSV export", "comma-separated file", "csv table")),
    ("excel", "Excel workbook", ("spreadsheet", "xlsx workbook", "Excel sheet")),
    ("image", "image", ("photo", "picture", "PNG image")),
    ("video", "video clip", ("video", "movie file", "mp4 recording")),
    ("audio", "audio recording", ("sound file", "mp3", "voice recording")),
    ("git", "git repository", ("repo", "git history", "code repository")),
    ("docker", "Docker image", ("container image", "docker container", "Dockerfile build")),
    ("k8s", "Kubernetes deployment", ("k8s deployment", "cluster workload", "kubernetes manifest")),
    ("postgres", "PostgreSQL database", ("postgres db", "SQL database", "database tables")),
    ("s3", "S3 bucket", ("object storage bucket", "AWS bucket", "s3 storage")),
    ("email", "email inbox", ("mailbox", "emails", "mail folder")),
    ("calendar", "calendar", ("schedule", "meeting calendar", "agenda")),
    ("slack", "Slack channel", ("chat channel", "slack workspace", "team chat")),
    ("jira", "Jira ticket", ("issue tracker ticket", "bug ticket", "jira issue")),
    ("markdown", "Markdown document", ("md file", "readme", "markdown notes")),
    ("json", "JSON file", ("json payload", "JSON document", "json config")),
    ("yaml", "YAML file", ("yml config", "YAML manifest", "yaml settings")),
    ("logs", "log file", ("server logs", "application log", "log output")),
    ("python", "Python package", ("pip package", "python project", "python module")),
    ("npm", "npm package", ("node package", "javascript package", "npm module")),
    ("cert", "TLS certificate", ("SSL certificate", "https certificate", "x509 cert")),
    ("dns", "DNS record", ("domain record", "DNS zone entry", "dns entry")),
    ("cron", "cron job", ("scheduled job", "crontab entry", "periodic task")),
    ("invoice", "invoice", ("bill", "billing statement", "customer invoice")),
    ("contract", "legal contract", ("agreement", "contract document", "legal agreement")),
    ("slides", "slide deck", ("presentation", "powerpoint", "keynote deck")),
    ("website", "website", ("web page", "site", "landing page")),
    ("api", "REST API", ("HTTP API", "web service endpoint", "rest endpoint")),
    ("translation", "translation file", ("locale file", "i18n strings", "language pack")),
    ("resume", "resume", ("CV", "curriculum vitae", "job resume")),
    ("recipe", "recipe", ("cooking recipe", "dish instructions", "meal recipe")),
    ("budget", "household budget", ("monthly budget", "expense sheet", "family finances")),
    ("travel", "travel itinerary", ("trip plan", "flight itinerary", "vacation schedule")),
    ("photos", "photo album", ("picture collection", "photo library", "gallery")),
    ("notebook", "Jupyter notebook", ("ipynb notebook", "jupyter file", "data notebook")),
    ("terraform", "Terraform module", ("infrastructure code", "terraform config", "tf module")),
    ("backup", "disk backup", ("system backup", "backup archive", "snapshot archive")),
    ("ssh", "SSH key", ("ssh keypair", "public key", "ssh credentials")),
    ("firewall", "firewall rule", ("iptables rule", "security group rule", "network firewall")),
)
ACTIONS = (
    ("merge", "Merge several {o} items into one", ("combine", "join together", "put into a single one")),
    (
        "convert",
        "Convert a {o} into another format",
        ("turn into a different format", "transform", "export as"),
    ),
    ("validate", "Validate a {o} and report what is wrong", ("check for errors in", "lint", "verify")),
    (
        "summarize",
        "Summarize the contents of a {o}",
        ("give me the gist of", "sum up", "write a short summary of"),
    ),
    ("clean", "Clean up and tidy a {o}", ("tidy up", "remove the clutter from", "clean")),
)
FRAMES = (
    "Can you {a} my {o}?",
    "I need to {a} this {o} for work tomorrow.",
    "Please {a} the {o} I uploaded.",
    "Could you help me {a} a {o}?",
    "How would you {a} the {o} we have?",
)
CHIT_CHAT = (
    "hi!", "thanks a lot", "ok", "good morning", "how's your day going?", "tell me a joke",
    "what's your favourite colour?", "I'm feeling a bit tired today", "lol that's funny",
    "you're great, thank you", "do you like music?", "nice weather today, isn't it?", "bye for now",
    "haha", "what do you think about cats?", "I just got back from a walk", "cool", "that's wild",
    "are you a robot?", "have a good night", "sounds good", "hmm, interesting", "wow", "see you later",
    "my weekend was relaxing", "do you ever sleep?", "I love sunny days", "cheers", "yes please",
    "no worries",
)  # fmt: skip

TOOLS = (
    "read_file", "write_file", "web_search", "run_shell", "http_get", "sql_query", "send_email",
    "create_ticket", "list_directory", "git_commit", "resize_image", "fetch_calendar",
)  # fmt: skip
ERRORS = (
    "ENOENT: no such file or directory",
    "401 Unauthorized: missing token",
    "TypeError: expected integer for 'limit'",
    "timeout after 30s",
    "permission denied",
    "invalid date format, expected YYYY-MM-DD",
)


@dataclass(frozen=True)
class GeneratedSkill:
    name: str
    description: str
    body: str
    host_uri: str


@dataclass(frozen=True)
class SkillTask:
    prompt: str
    skill: str


@dataclass(frozen=True)
class ToolCase:
    tool: str
    error: str
    failing_arguments: str
    fixed_arguments: str
    next_prompt: str
    via_recent_call: bool


def skills(count: int = 200) -> list[GeneratedSkill]:
    out = []
    for key, label, _ in OBJECTS:
        for verb, description, _ in ACTIONS:
            name = f"{key}-{verb}"
            body = (
                f"# {name}\n\n{description.format(o=label)}.\n\n## Steps\n1. Locate the {label}.\n"
                f"2. Run the `{name}` helper.\n3. Report the result to the user.\n"
            )
            out.append(
                GeneratedSkill(name, description.format(o=label) + ".", body, f"skills/{name}/SKILL.md")
            )
    return out[:count]


def skill_tasks(available: list[GeneratedSkill], count: int, seed: int) -> list[SkillTask]:
    rng = random.Random(seed)
    objects = {key: synonyms for key, _, synonyms in OBJECTS}
    actions = {verb: synonyms for verb, _, synonyms in ACTIONS}
    tasks = []
    for _ in range(count):
        skill = rng.choice(available)
        key, verb = skill.name.split("-", 1)
        frame = rng.choice(FRAMES)
        tasks.append(
            SkillTask(frame.format(a=rng.choice(actions[verb]), o=rng.choice(objects[key])), skill.name)
        )
    return tasks


def tool_cases(count: int, seed: int) -> list[ToolCase]:
    rng = random.Random(seed)
    cases = []
    for index in range(count):
        tool = TOOLS[index % len(TOOLS)]
        failing = {"path": "x", "limit": "10"} if index % 2 else {"query": "q"}
        fixed = {"path": "x", "limit": 10} if index % 2 else {"query": "q", "since": "2026-01-01"}
        spoken = tool.replace("_", " ") if rng.random() < 0.5 else tool
        prompt = rng.choice(
            ("Use {t} again for the report.", "Try {t} on the next item.", "Run {t} once more.")
        )
        cases.append(
            ToolCase(
                tool,
                rng.choice(ERRORS),
                json.dumps(failing),
                json.dumps(fixed),
                prompt.format(t=spoken),
                via_recent_call=index % 3 == 0,
            )
        )
    return cases


NEEDS_RECALL = (
    "What did I say my sister's name was?",
    "When is my dentist appointment?",
    "Which hotel did we pick for the Lisbon trip?",
    "Remind me what the budget for the kitchen project was.",
    "What was the error we saw in the deploy on Monday?",
    "Who is Marta Kowalski again?",
    "Can you summarize the PDF report I uploaded about Q3 sales?",
    "Draft an email to Tom about the invoice from March 3.",
    "What database did we decide to use for the analytics service?",
    "How many people are coming to the party on 2026-05-14?",
)
NO_RECALL = (
    "thanks!", "ok", "hi there", "great, thank you", "cool", "good morning", "lol", "ok thanks",
    "make that shorter", "translate it into French", "continue", "can you rephrase that?",
    "explain the second point in more detail", "shorter please", "say that again",
)  # fmt: skip
MEMORIES = (
    "The user's sister is called Ines.",
    "Dentist appointment on 2026-06-02 at 9:30 with Dr. Alves.",
    "For the Lisbon trip we picked the Hotel Miradouro.",
    "The kitchen project budget is 12,000 euros.",
    "The Monday deploy failed with 'connection reset by peer' from the payments API.",
    "Marta Kowalski is the new product manager on the analytics team.",
    "We decided to use ClickHouse for the analytics service.",
    "Twenty-three people are coming to the party on 2026-05-14.",
    "The party plan: budget first, then the venue, then the invitations.",
    "The user prefers short answers in bullet points.",
)
ASSISTANT_ANSWER = (
    "Here is the plan: first we review the budget, second we book the venue, third we send the "
    "invitations. The second point matters most because the venue fills up early."
)


def mixed_stream(count: int, seed: int) -> list[tuple[str, bool]]:
    """(prompt, needs recall) pairs, about half of each."""
    rng = random.Random(seed)
    return [
        (rng.choice(NEEDS_RECALL), True) if rng.random() < 0.5 else (rng.choice(NO_RECALL), False)
        for _ in range(count)
    ]
