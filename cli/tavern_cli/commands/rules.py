"""`tavern rules`: the rules feedback channel and expression approvals, through
`tavern.rpc.consolidator.*`.

    tavern rules list --scope S              drafts and active rules (⚠ marks the 40-char line)
    tavern rules accept|reject N --scope S   N: 1-based draft number (or a draft id)
    tavern rules pin|unpin N --scope S       N: 1-based active rule number (or a rule id)
    tavern rules draft --scope S             draft from recent corrections now
    tavern rules rebuild [--scope S]         rebuild the rule view (and files) from the ledger
    tavern rules style list [--scope S] [--pending]
    tavern rules style approve|reject|rollback CANDIDATE
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tavern_cli.commands.dream import (
    ConsolidatorClient,
    ConsolidatorRefused,
    common_options,
    print_json,
    run_command,
)

DECISIONS = ("accept", "reject", "pin", "unpin")
STYLE_OPS = ("list", "approve", "reject", "rollback")


def configure(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common_options(common)
    ops = parser.add_subparsers(dest="op", metavar="OP", required=True)
    ops.add_parser("list", help="drafts and active rules", parents=[common]).add_argument(
        "--scope", required=True
    )
    for name in DECISIONS:
        p = ops.add_parser(name, help=f"{name} one rule", parents=[common])
        p.add_argument("ref", help="1-based number from `tavern rules list`, or an id")
        p.add_argument("--scope", required=True)
    ops.add_parser("draft", help="draft rules now", parents=[common]).add_argument(
        "--scope", required=True
    )
    ops.add_parser("rebuild", help="rebuild the rule view", parents=[common]).add_argument(
        "--scope"
    )
    style = ops.add_parser("style", help="expression (style) promotion", parents=[common])
    style.add_argument("style_op", choices=STYLE_OPS)
    style.add_argument("candidate", nargs="?")
    style.add_argument("--scope")
    style.add_argument("--pending", action="store_true")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    return run_command(args, perform)


async def perform(client: ConsolidatorClient, args: argparse.Namespace, out: TextIO) -> int:
    """Run one `tavern rules` operation; `list` prints a table, the others JSON."""
    try:
        op, body = request_of(args)
        reply = await client.call(op, **body)
    except (ConsolidatorRefused, ValueError) as exc:
        print(f"refused: {exc}", file=out)
        return 1
    if args.op == "list":
        out.write(render_list(reply))
    else:
        print_json(out, reply)
    return 0


def request_of(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    if args.op == "list":
        return "rules.list", {"scope_id": args.scope}
    if args.op in DECISIONS:
        return "rules.decide", {"scope_id": args.scope, "op": args.op, "ref": args.ref}
    if args.op == "draft":
        return "rules.draft", {"scope_id": args.scope}
    if args.op == "rebuild":
        return "rules.rebuild", {"scope_id": args.scope}
    if args.style_op == "list":
        return "expression.list", {"scope_id": args.scope, "pending": args.pending}
    if not args.candidate:
        raise ValueError(f"`tavern rules style {args.style_op}` needs a candidate id")
    decision = "approve" if args.style_op == "approve" else args.style_op
    return "expression.decide", {"candidate_id": args.candidate, "decision": decision}


def render_list(reply: dict[str, Any]) -> str:
    lines = [f"scope {reply['scope_id']}", "drafts:"]
    lines += [_line(r) for r in reply["drafts"]] or ["  (none)"]
    lines.append("active:")
    lines += [_line(r, pinned=r.get("pinned", False)) for r in reply["active"]] or ["  (none)"]
    return "\n".join(lines) + "\n"


def _line(r: dict[str, Any], pinned: bool = False) -> str:
    pin = " [pinned]" if pinned else ""
    warning = f"  {r['warning']}" if r.get("warning") else ""
    return f"  {r['n']}. [{r['domain']}] {r['text']}{pin}  ({r['id']}){warning}"
