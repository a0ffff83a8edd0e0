#!/usr/bin/env python3
"""Check that the Docker build context of ./Dockerfile holds everything the image needs.

No Docker engine is needed: the check reads the Dockerfile's COPY instructions and .dockerignore
(with Docker's rules: patterns in order, the last match wins, ``!`` re-includes, a pattern that
matches a parent directory matches everything under it) and computes which repository files
reach the build. It then verifies:

1. pyproject.toml and every wheel package of ``[tool.hatch.build.targets.wheel]`` are copied;
2. every Python file of those packages present in the repository survives .dockerignore;
3. the console-script entry point module (``[project.scripts]``) and the build-time module
   ``shared.tokens`` (tiktoken cache seeding), and every first-party module they import,
   transitively, are in the context;
4. every COPY source (other than ``--from=`` stage copies) exists.

A first-party module that is imported but does not exist in the repository at all is reported as
a warning (it has not been written yet; the Python tests will catch it); a module that exists but
is excluded from the build context is an error.

Usage: scripts/check-docker-context.py [--repo PATH]
Exit status 0 when the context is complete, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

BUILD_TIME_MODULES = ("shared.tokens",)
REQUIRED_PATHS = ("pyproject.toml", "shared", "services", "gen/python")


@dataclass(frozen=True)
class IgnoreRule:
    regex: re.Pattern[str]
    negated: bool
    text: str


def _pattern_to_regex(pattern: str) -> re.Pattern[str]:
    """Translate a .dockerignore pattern (Go filepath.Match plus ``**``) to a regex on a path."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            # "**/" matches zero or more directories; a trailing "**" matches anything.
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            else:
                out.append(".*")
                i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("^") or body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z")


def parse_dockerignore(path: Path) -> list[IgnoreRule]:
    rules: list[IgnoreRule] = []
    if not path.is_file():
        return rules
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:].strip()
        cleaned = str(PurePosixPath("/" + line)).lstrip("/") or "."
        rules.append(IgnoreRule(_pattern_to_regex(cleaned), negated, raw.strip()))
    return rules


def is_excluded(rel_path: str, rules: list[IgnoreRule]) -> bool:
    """Docker's semantics: walk the rules in order; a rule applies if it matches the path or any
    of its parent directories; the last applicable rule decides."""
    parts = rel_path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for rule in rules:
        if any(rule.regex.match(candidate) for candidate in candidates):
            excluded = not rule.negated
    return excluded


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    buffer = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") and not buffer:
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        buffer += stripped
        if buffer.strip():
            keyword, _, rest = buffer.strip().partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
        buffer = ""
    return instructions


def copy_sources(dockerfile: Path) -> list[str]:
    """Context-relative sources of COPY/ADD instructions that read the build context."""
    sources: list[str] = []
    for keyword, args in dockerfile_instructions(dockerfile):
        if keyword not in {"COPY", "ADD"}:
            continue
        tokens = shlex.split(args)
        if any(token.startswith("--from") for token in tokens):
            continue
        positional = [token for token in tokens if not token.startswith("--")]
        sources.extend(positional[:-1])
    return sources


def context_files(repo: Path, sources: list[str], rules: list[IgnoreRule]) -> set[str]:
    files: set[str] = set()
    for source in sources:
        root = repo / source
        candidates = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for candidate in candidates:
            rel = candidate.relative_to(repo).as_posix()
            if not is_excluded(rel, rules):
                files.add(rel)
    return files


@dataclass(frozen=True)
class PackageLayout:
    """Where each first-party top-level package lives in the repository (hatch sources mapping)."""

    roots: dict[str, str]  # top-level package name -> repository directory holding it

    def module_candidates(self, module: str) -> list[str]:
        top = module.split(".", maxsplit=1)[0]
        base = self.roots.get(top)
        if base is None:
            return []
        rel = "/".join(module.split("."))
        prefix = f"{base}/" if base else ""
        return [f"{prefix}{rel}.py", f"{prefix}{rel}/__init__.py"]


def package_layout(pyproject: dict[str, object]) -> tuple[PackageLayout, list[str]]:
    wheel = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]  # type: ignore[index]
    packages: list[str] = list(wheel["packages"])
    sources: dict[str, str] = dict(wheel.get("sources", {}))
    roots: dict[str, str] = {}
    for package in packages:
        mapped = package
        for src, dest in sources.items():
            if package == src or package.startswith(src.rstrip("/") + "/"):
                mapped = (dest + package[len(src) :]).lstrip("/")
        top = mapped.split("/")[0]
        roots[top] = str(PurePosixPath(package).parent) if "/" in package else ""
    return PackageLayout(roots), packages


def first_party_imports(source: str, module: str, is_package: bool, layout: PackageLayout) -> set[str]:
    tree = ast.parse(source)
    found: set[str] = set()
    package_parts = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names if alias.name != "*"]
        else:
            continue
        for name in names:
            if name and name.split(".")[0] in layout.roots:
                found.add(name)
    return found


def _module_file(repo: Path, layout: PackageLayout, module: str) -> str | None:
    return next((c for c in layout.module_candidates(module) if (repo / c).is_file()), None)


def resolve_closure(repo: Path, roots: list[str], layout: PackageLayout) -> tuple[dict[str, str], set[str]]:
    """Map each reachable first-party module to its file; also return the names not found."""
    resolved: dict[str, str] = {}
    missing: set[str] = set()
    queue = list(roots)
    seen: set[str] = set()
    while queue:
        module = queue.pop()
        if module in seen:
            continue
        seen.add(module)
        # Importing a.b.c also imports a and a.b.
        parts = module.split(".")
        queue.extend(".".join(parts[:n]) for n in range(1, len(parts)))
        path = _module_file(repo, layout, module)
        if path is None:
            # `from pkg import name` where name is an attribute of pkg, not a submodule, is fine.
            parent = ".".join(parts[:-1])
            if module in roots or not parent or _module_file(repo, layout, parent) is None:
                missing.add(module)
            continue
        resolved[module] = path
        text = (repo / path).read_text(encoding="utf-8")
        queue.extend(first_party_imports(text, module, path.endswith("__init__.py"), layout))
    return resolved, missing


def check_packages(repo: Path, packages: list[str], sources: list[str], files: set[str]) -> list[str]:
    errors: list[str] = []
    for required in dict.fromkeys((*REQUIRED_PATHS, *packages)):
        if not any(f == required or f.startswith(required.rstrip("/") + "/") for f in files):
            errors.append(f"{required} is not in the build context (COPY lines: {sources})")
    for package in packages:
        for py in sorted((repo / package).rglob("*.py")):
            rel = py.relative_to(repo).as_posix()
            if "__pycache__" not in rel and rel not in files:
                errors.append(f"{rel} (wheel package {package}) is excluded from the build context")
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    repo: Path = args.repo.resolve()

    pyproject = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    layout, packages = package_layout(pyproject)
    rules = parse_dockerignore(repo / ".dockerignore")
    sources = copy_sources(repo / "Dockerfile")
    files = context_files(repo, [s for s in sources if (repo / s).exists()], rules)
    errors = [f"COPY source {source!r} does not exist" for source in sources if not (repo / source).exists()]
    errors += check_packages(repo, packages, sources, files)

    entry_points: dict[str, str] = dict(pyproject["project"].get("scripts", {}))
    roots = [target.split(":")[0] for target in entry_points.values()] + list(BUILD_TIME_MODULES)
    resolved, missing = resolve_closure(repo, roots, layout)
    errors += [
        f"module {module} ({path}) is imported but excluded from the build context"
        for module, path in sorted(resolved.items())
        if path not in files
    ]
    warnings = [
        f"module {module} is imported/required but not in the repository yet" for module in sorted(missing)
    ]

    print(f"check-docker-context: Dockerfile COPY sources: {', '.join(sources)}")
    print(f"check-docker-context: {len(rules)} .dockerignore rules; {len(files)} files in context")
    print(f"check-docker-context: entry points {entry_points}; build-time {list(BUILD_TIME_MODULES)}")
    print(f"check-docker-context: {len(resolved)} first-party modules reachable, all checked")
    for warning in warnings:
        print(f"WARNING: {warning}")
    for error in errors:
        print(f"ERROR: {error}")
    if errors:
        print(f"check-docker-context: FAILED ({len(errors)} errors)")
        return 1
    print("check-docker-context: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
