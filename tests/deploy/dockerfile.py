"""Read deploy/Dockerfile as instructions and stages, so tests follow the file's own steps."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    args: str  # the rest of the (joined) line

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form ENTRYPOINT/CMD/HEALTHCHECK CMD, else None."""
        text = self.args.split("CMD", 1)[1] if self.keyword == "HEALTHCHECK" else self.args
        try:
            value = json.loads(text.strip())
        except ValueError:
            return None
        return value if isinstance(value, list) else None


@dataclass(frozen=True)
class Stage:
    base: str
    name: str | None
    steps: tuple[Instruction, ...]

    def all(self, keyword: str) -> list[Instruction]:
        return [step for step in self.steps if step.keyword == keyword]


def _logical_lines(text: str) -> list[str]:
    """Lines with `\\` continuations joined and comments dropped (parser directives included)."""
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):  # a comment inside a continued instruction
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1].strip() + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current:
        lines.append(current.strip())
    return lines


def parse(path: Path) -> list[Stage]:
    stages: list[Stage] = []
    base, name = "", None
    steps: list[Instruction] = []
    for line in _logical_lines(path.read_text()):
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            if base:
                stages.append(Stage(base, name, tuple(steps)))
            words = args.split()
            base, steps = words[0], []
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            continue
        steps.append(Instruction(keyword, args.strip()))
    stages.append(Stage(base, name, tuple(steps)))
    return stages


def run_command(step: Instruction) -> list[str]:
    """The shell words of a shell-form RUN, without its `--mount=...` (and other) flags."""
    words = shlex.split(step.args)
    while words and words[0].startswith("--"):
        words.pop(0)
    return words


def env_values(stage: Stage) -> dict[str, str]:
    """ENV key=value pairs of a stage (later ones win)."""
    values: dict[str, str] = {}
    for step in stage.all("ENV"):
        for word in shlex.split(step.args):
            key, _, value = word.partition("=")
            values[key] = value
    return values
