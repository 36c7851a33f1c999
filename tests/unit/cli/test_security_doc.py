"""docs/security.md says what each NATS login can and cannot do: every cell of its table is
what the rules `tavern_cli.access` generates (and renders into deploy/nats/accounts.conf and
the embedded config) allow, and the table covers the attacks of issue 48."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tavern_cli import access
from tavern_runtime.credentials import NATS_USERS

DOC = Path(__file__).resolve().parents[3] / "docs" / "security.md"
HEADING = "#### What each login can and cannot do"


@dataclass(frozen=True)
class Row:
    what: str
    kind: str
    subject: str
    says: dict[str, bool]


def _matches(pattern: str, subject: str) -> bool:
    """NATS wildcard matching of a concrete subject (`*` one token, `>` one or more)."""
    want, have = pattern.split("."), subject.split(".")
    for index, token in enumerate(want):
        if token == ">":
            return len(have) > index
        if index >= len(have) or (token != "*" and token != have[index]):
            return False
    return len(want) == len(have)


def _allowed(user: str, kind: str, subject: str) -> bool:
    [rules] = [p for p in access.permissions() if p.user == user]
    allow, deny = (
        (rules.publish, rules.deny_publish)
        if kind == "publish"
        else (rules.subscribe, rules.deny_subscribe)
    )
    return any(_matches(a, subject) for a in allow) and not any(_matches(d, subject) for d in deny)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table() -> tuple[list[str], list[Row]]:
    text = DOC.read_text()
    assert HEADING in text, f"{DOC} lost its section {HEADING!r}"
    lines = text.split(HEADING, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| what |"))
    header = [c.strip("`") for c in _cells(lines[start])[2:]]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        what, probe, *marks = _cells(line)
        found = re.fullmatch(r"(publish|subscribe) `([^`]+)`", probe)
        assert found, f"probe {probe!r} should read: publish|subscribe `subject`"
        assert set(marks) <= {"yes", "no"}, line
        assert len(marks) == len(header), line
        says = dict(zip(header, [m == "yes" for m in marks], strict=True))
        rows.append(Row(what, found[1], found[2], says))
    return header, rows


def test_the_table_has_a_column_for_every_login() -> None:
    header, rows = _table()
    assert header == list(NATS_USERS)
    assert all(len(row.says) == len(NATS_USERS) for row in rows)


def test_every_cell_is_what_the_generated_rules_allow() -> None:
    _, rows = _table()
    wrong = [
        (row.what, user, "yes" if said else "no")
        for row in rows
        for user, said in row.says.items()
        if said != _allowed(user, row.kind, row.subject)
    ]
    assert wrong == []


def test_the_table_covers_the_durable_rewrite_and_the_log_reads() -> None:
    """Issue 48: the forms that could rewrite `ledger-ingest`, and the reads of a session log,
    each stated for every login; the client may do none of them."""
    _, rows = _table()
    probed = {(row.kind, row.subject): row for row in rows}
    attacks = [
        ("publish", "$JS.API.CONSUMER.CREATE.SESSIONS"),
        ("publish", "$JS.API.CONSUMER.CREATE.SESSIONS.ledger-ingest"),
        ("publish", "$JS.API.CONSUMER.CREATE.SESSIONS.ledger-ingest.tavern.session.x.y"),
        ("publish", "$JS.API.CONSUMER.DURABLE.CREATE.SESSIONS.ledger-ingest"),
        ("publish", "$JS.API.CONSUMER.DELETE.SESSIONS.ledger-ingest"),
        ("subscribe", "tavern.session.s1.user.message"),
        ("publish", "$JS.API.DIRECT.GET.SESSIONS"),
        ("publish", "$JS.API.STREAM.MSG.GET.SESSIONS"),
        ("publish", "$JS.API.STREAM.INFO.SESSIONS"),
    ]
    assert [a for a in attacks if a not in probed] == []
    assert [a for a in attacks if probed[a].says["client"]] == []
    by_name = attacks[1:5]
    assert [a for a in by_name for u in NATS_USERS if u != "operator" and probed[a].says[u]] == []


def test_the_doc_counts_the_logins_it_names() -> None:
    text = DOC.read_text()
    count = {7: "seven"}.get(len(NATS_USERS), str(len(NATS_USERS)))
    assert f"with {count} users" in text
