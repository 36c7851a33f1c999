"""SillyTavern prompt assembly: section order, world info placement, budget, rebuild."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from tavern_loop.domain.macros import MacroEnv
from tavern_loop.domain.stchat import ChatEntry
from tavern_loop.domain.stprompt import Card, LoreEntry, StInputs, assemble, rebuild_st
from tavern_loop.options import StOptions

CARD = Card(
    name="Mira",
    description="{{char}} is the keeper's apprentice.",
    personality="patient, wry",
    scenario="A storm night. {{user}} knocks.",
    mes_example="<START>\n{{user}}: Who are you?\n{{char}}: Mira.\n<START>\n{{char}}: Steps!",
)
ENV = MacroEnv(char="Mira", user="Ren", now=datetime(2026, 8, 14, 15, 5, tzinfo=UTC), seed=1)
CHAT = [
    ChatEntry(3, True, "Hello?"),
    ChatEntry(5, False, "Who knocks?", swipes=("Who knocks?",)),
    ChatEntry(9, True, "A traveller. Is the lighthouse open?"),
]


def inputs(**changes: object) -> StInputs:
    base = StInputs(CARD, "Ren", "Ren is a cartographer.", [], CHAT, ENV)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_sections_come_in_sillytaverns_order_with_macros_expanded() -> None:
    lore = [
        LoreEntry("b.1", "The lighthouse has 214 steps.", position=0),
        LoreEntry("b.2", "{{char}} fears the sea.", position=1),
        LoreEntry("b.3", "Before examples.", position=5),
        LoreEntry("b.4", "After examples.", position=6),
    ]
    prompt = assemble(inputs(lore=lore))
    assert prompt.system.split("\n\n") == [
        "Write Mira's next reply in a fictional chat between Mira and Ren.",
        "The lighthouse has 214 steps.",
        "Ren is a cartographer.",
        "Mira is the keeper's apprentice.",
        "[Mira's personality: patient, wry]",
        "[Circumstances and context of the dialogue: A storm night. Ren knocks.]",
        "Mira fears the sea.",
        "Before examples.",
        "[Example Chat]\nRen: Who are you?\nMira: Mira.",
        "[Example Chat]\nMira: Steps!",
        "After examples.",
        "[Start a new Chat]",
    ]
    assert prompt.messages() == [
        {"role": "user", "content": "Hello?"},
        {"role": "assistant", "content": "Who knocks?"},
        {"role": "user", "content": "A traveller. Is the lighthouse open?"},
    ]


def test_the_cards_system_prompt_replaces_the_main_one_and_can_quote_it() -> None:
    card = replace(
        CARD, system_prompt="{{original}} Stay terse.", post_history_instructions="Be {{char}}."
    )
    prompt = assemble(inputs(card=card))
    assert prompt.system.startswith(
        "Write Mira's next reply in a fictional chat between Mira and Ren. Stay terse.\n\n"
    )
    assert prompt.messages()[-1] == {"role": "system", "content": "Be Mira."}


def test_depth_entries_go_into_the_history_grouped_by_depth_and_role() -> None:
    lore = [
        LoreEntry("b.1", "Depth one.", position=4, depth=1, role=0),
        LoreEntry("b.2", "Also depth one.", position=4, depth=1, role=0, order=200),
        LoreEntry("b.3", "As the user.", position=4, depth=0, role=1),
        LoreEntry("b.4", "Author's note.", position=2),
    ]
    roles = [(m["role"], m["content"]) for m in assemble(inputs(lore=lore)).messages()]
    assert roles == [
        ("system", "Author's note."),
        ("user", "Hello?"),
        ("assistant", "Who knocks?"),
        ("system", "Depth one.\nAlso depth one."),
        ("user", "A traveller. Is the lighthouse open?"),
        ("user", "As the user."),
    ]
    deep = assemble(inputs(lore=[LoreEntry("b.4", "Author's note.", position=2)]))
    assert deep.messages()[0] == {"role": "system", "content": "Author's note."}


def test_history_is_cut_to_the_budget_newest_first() -> None:
    long_chat = [ChatEntry(i, i % 2 == 1, f"message {i} " + "word " * 50) for i in range(1, 41)]
    options = StOptions(reply_tokens=300)
    prompt = assemble(inputs(chat=long_chat, options=options, window_tokens=1500))
    assert prompt.history[-1].seq == 40
    assert 1 < len(prompt.history) < 40
    assert [e.seq for e in prompt.history] == list(range(41 - len(prompt.history), 41))
    tiny = assemble(inputs(chat=long_chat, window_tokens=10))
    assert [e.seq for e in tiny.history] == [40], "the newest message always goes"


def test_a_recorded_prompt_rebuilds_the_same_messages() -> None:
    lore = [LoreEntry("b.1", "Depth.", position=4, depth=1)]
    card = replace(CARD, post_history_instructions="After.")
    prompt = assemble(inputs(lore=lore, card=card))
    record = prompt.record()
    assert (record["first"], record["last"]) == (3, 9)
    assert rebuild_st(CHAT, record) == prompt.messages()
    assert rebuild_st(CHAT, assemble(inputs(chat=[])).record()) == []


def test_a_group_gets_sillytaverns_group_prompt() -> None:
    chat = [
        ChatEntry(3, True, "Hello, all of you."),
        ChatEntry(5, False, "Who knocks?", swipes=("Who knocks?",), speaker="Mira"),
        ChatEntry(7, False, "Not the keeper.", swipes=("Not the keeper.",), speaker="Cael"),
    ]
    card = replace(CARD, name="Cael", post_history_instructions="Stay brief.")
    env = replace(ENV, char="Cael", group="Mira, Cael, Oren")
    prompt = assemble(inputs(card=card, chat=chat, env=env, group=True))
    parts = prompt.system.split("\n\n")
    assert (
        parts[0] == "Write Cael's next reply in a fictional chat between Mira, Cael, Oren and Ren."
    )
    assert parts[-1] == "[Start a new group chat. Group members: Mira, Cael, Oren]"
    assert prompt.messages() == [
        {"role": "user", "content": "Hello, all of you."},
        {"role": "assistant", "content": "Mira: Who knocks?"},
        {"role": "assistant", "content": "Cael: Not the keeper."},
        {"role": "system", "content": "[Write the next reply only as Cael.]"},
        {"role": "system", "content": "Stay brief."},
    ], "members named in the history, the nudge at its end, then post-history instructions"
    assert rebuild_st(chat, prompt.record()) == prompt.messages()
