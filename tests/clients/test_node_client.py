"""`npm install --install-links ./clients/node` into an empty project, then its README snippet
against a real engine; and the package's compiled stubs are those of gen/ts."""

from __future__ import annotations

import asyncio
import filecmp
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from .conftest import README_TARGET, REPO, readme_snippet

PACKAGE = REPO / "clients" / "node"
TSC = REPO / "node_modules" / ".bin" / "tsc"
pytestmark = [
    pytest.mark.stack,
    pytest.mark.skipif(shutil.which("npm") is None, reason="needs Node.js and npm"),
]


def _files(root: Path) -> dict[str, Path]:
    return {str(path.relative_to(root)): path for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.mark.skipif(not TSC.exists(), reason="needs npm ci (make install)")
def test_compiled_stubs_are_gen_ts_compiled(tmp_path: Path) -> None:
    subprocess.run(
        [str(TSC), "-p", str(PACKAGE / "tsconfig.json"), "--outDir", str(tmp_path)],
        check=True,
        timeout=300,
    )
    fresh, committed = _files(tmp_path), _files(PACKAGE / "dist")
    assert sorted(fresh) == sorted(committed), "make protos rebuilds clients/node/dist"
    assert [name for name in fresh if not filecmp.cmp(fresh[name], committed[name], shallow=False)] == []


def test_package_version_and_dependencies_match_the_stubs() -> None:
    package = json.loads((PACKAGE / "package.json").read_text("utf-8"))
    root = json.loads((REPO / "package.json").read_text("utf-8"))["devDependencies"]
    assert package["version"].split(".")[0] == "1"  # contextengine.v1
    for name in ("@bufbuild/protobuf", "@grpc/grpc-js"):  # what gen/ts imports, as generated against
        assert package["dependencies"][name] == "^" + root[name]


async def test_readme_snippet_recalls_session_one_in_session_two(engine_address: str, tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "package.json").write_text(json.dumps({"name": "host", "private": True, "type": "module"}))
    install = await asyncio.create_subprocess_exec(
        "npm", "install", "--install-links", "--no-audit", "--no-fund", "--loglevel=error",
        str(PACKAGE), "@grpc/grpc-js",
        cwd=host, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    installed, _ = await asyncio.wait_for(install.communicate(), timeout=600)
    assert install.returncode == 0, installed.decode()
    assert not (host / "node_modules/@viking-context-engine/contextengine").is_symlink()
    user = f"newcomer-{uuid.uuid4().hex[:8]}"
    snippet = readme_snippet(PACKAGE / "README.md", "js")
    (host / "host.mjs").write_text(
        snippet.replace(README_TARGET, engine_address).replace('"alice"', f'"{user}"')
    )
    run = await asyncio.create_subprocess_exec(
        "node", "host.mjs", cwd=host, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    output, _ = await asyncio.wait_for(run.communicate(), timeout=180)
    text = output.decode()
    assert run.returncode == 0, text
    (recalled,) = [line for line in text.splitlines() if line.startswith("recalled: ")]
    assert "PostgreSQL 16" in recalled, text
