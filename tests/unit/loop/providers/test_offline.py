from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tavern_llm import offline
from tavern_llm.base import (
    ChatRequest,
    FinalMessage,
    ProviderError,
    StreamDelta,
    StreamItem,
)
from tavern_llm.offline import CONTEXT_WINDOW, OfflineProvider, respond
from tavern_llm.phrases import tool_requests

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("memory_write", "memory_search", "spill_read", "roll_dice", "set_var")
]
RECALL = (
    "[recall]\n- [profile] The user's name is Alice\n- [memory:7] Alice likes green tea\n"
    "- [memory:9] The cat is called Miso"
)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reply(
    *messages: dict[str, Any], tools: list[dict[str, Any]] | None = None, **kw: Any
) -> FinalMessage:
    items = respond(
        ChatRequest(
            model="offline-1",
            messages=list(messages),
            tools=TOOLS if tools is None else tools,
            **kw,
        )
    )
    final = items[-1]
    assert isinstance(final, FinalMessage)
    return final


def calls(final: FinalMessage) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in final.tool_calls]


def test_same_messages_give_the_same_reply_and_ids() -> None:
    messages = [user("hello"), user('call roll_dice with {"sides": 6}')]
    request = ChatRequest(model="offline-1", messages=messages, tools=TOOLS)
    assert respond(request) == respond(request)


def test_the_same_request_in_another_conversation_gets_other_ids() -> None:
    ask = user('call roll_dice with {"sides": 6}')
    first, second = reply(ask), reply(user("earlier"), ask)
    assert first.tool_calls[0].arguments == second.tool_calls[0].arguments
    assert first.tool_calls[0].id != second.tool_calls[0].id
    assert first.tool_calls[0].id.startswith("call_0_")


def test_final_message_is_labelled_offline_with_estimated_usage() -> None:
    final = reply(user("good morning"))
    assert (final.provider, final.model, final.offline, final.finish_reason) == (
        "offline",
        "offline-1",
        True,
        "stop",
    )
    assert final.usage is not None
    assert final.usage.total_tokens == final.usage.prompt_tokens + final.usage.completion_tokens
    assert final.usage.completion_tokens == pytest.approx(len(final.content) / 4, abs=1)


def test_plain_message_is_quoted_and_streamed_in_word_chunks() -> None:
    text = "one two three four five six seven eight nine ten"
    items = respond(ChatRequest(model="offline-1", messages=[user(text)], tools=[]))
    *deltas, final = items
    assert isinstance(final, FinalMessage)
    assert f'You said: "{text}"' in final.content
    assert "not a model" in final.content
    assert len(deltas) > 1
    assert all(isinstance(d, StreamDelta) and len(d.text.split()) <= 8 for d in deltas)
    assert "".join(d.text for d in deltas if isinstance(d, StreamDelta)) == final.content


def test_remember_that_calls_memory_write() -> None:
    final = reply(user("Please remember that my sister lives in Lyon."))
    assert calls(final) == [("memory_write", {"content": "my sister lives in Lyon"})]
    assert (final.finish_reason, final.content) == ("tool_calls", "")


@pytest.mark.parametrize("text", ["记住：我喜欢喝茶", "记住:我喜欢喝茶。"])  # noqa: RUF001
def test_chinese_remember_calls_memory_write(text: str) -> None:
    assert calls(reply(user(text))) == [("memory_write", {"content": "我喜欢喝茶"})]


@pytest.mark.parametrize(
    "text", ["search memory for green tea", "What do you remember about green tea?"]
)
def test_memory_questions_call_memory_search(text: str) -> None:
    assert calls(reply(user(text))) == [("memory_search", {"query": "green tea"})]


def test_call_phrases_keep_raw_arguments_in_order() -> None:
    text = 'call roll_dice with {"sides": 6, "note": "a } brace"} and call set_var with {"k": "v"}'
    final = reply(user(text))
    assert [(c.name, c.arguments) for c in final.tool_calls] == [
        ("roll_dice", '{"sides": 6, "note": "a } brace"}'),
        ("set_var", '{"k": "v"}'),
    ]
    assert [c.id[:7] for c in final.tool_calls] == ["call_0_", "call_1_"]


def test_call_with_invalid_json_passes_the_raw_text_on() -> None:
    final = reply(user("call set_var with {k: 1"))
    assert [(c.name, c.arguments) for c in final.tool_calls] == [("set_var", "{k: 1")]


def test_read_spill_calls_spill_read_with_the_locator() -> None:
    final = reply(user("read spill spill://s-1/call_9.txt please"))
    assert calls(final) == [("spill_read", {"locator": "spill://s-1/call_9.txt"})]


def test_free_text_stops_at_the_next_request() -> None:
    requests = tool_requests('remember that tea is good and call set_var with {"a": 1}')
    assert [(r.tool, r.arguments) for r in requests] == [
        ("memory_write", '{"content": "tea is good"}'),
        ("set_var", '{"a": 1}'),
    ]


def test_a_tool_not_offered_is_refused_in_words() -> None:
    final = reply(user("call launch_rockets with {}"))
    assert final.tool_calls == ()
    assert "launch_rockets" in final.content
    assert "not among the tools" in final.content


def test_after_tool_results_it_summarises_and_calls_nothing() -> None:
    assistant = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "memory_write", "arguments": "{}"},
            },
            {"id": "c2", "type": "function", "function": {"name": "roll_dice", "arguments": "{}"}},
        ],
    }
    results = [
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "tool", "tool_call_id": "c2", "content": '{"value": 4}'},
    ]
    final = reply(user("remember that x"), assistant, *results, user(RECALL))
    assert final.content == 'Done: memory_write -> ok; roll_dice -> {"value": 4}'
    assert (final.tool_calls, final.finish_reason) == ((), "stop")


def test_what_is_my_name_cites_the_recalled_line() -> None:
    final = reply(user(RECALL), user("What is my name?"))
    assert final.content == "From what I recall: [profile] The user's name is Alice."


def test_recall_after_the_question_still_counts() -> None:
    assert (
        "[memory:9] The cat is called Miso"
        in reply(user("what's the cat called?"), user(RECALL)).content
    )


def test_what_do_you_remember_lists_recalled_lines() -> None:
    final = reply(user(RECALL), user("What do you remember?"))
    assert final.content.startswith("I remember: [profile] The user's name is Alice; [memory:7]")


def test_memory_question_without_memory_search_answers_from_recall() -> None:
    final = reply(user(RECALL), user("what do you remember about green tea?"), tools=[])
    assert final.content == "I remember: [memory:7] Alice likes green tea."


def test_chinese_question_matches_recalled_chinese_lines() -> None:
    recall = "[memory]\n- [profile] 用户的名字是小明"
    assert "小明" in reply(user(recall), user("我叫什么名字？")).content  # noqa: RUF001


def test_a_question_without_matching_recall_says_so() -> None:
    final = reply(user(RECALL), user("How far is the moon?"))
    assert final.content.startswith('You asked: "How far is the moon?". Nothing I recall')


def test_markdown_checkboxes_are_not_mistaken_for_recall() -> None:
    final = reply(user("- [ ] buy milk\n- [x] call mum"))
    assert final.content.startswith('You said: "- [ ] buy milk')


def test_max_tokens_cuts_the_reply_with_finish_reason_length() -> None:
    final = reply(user("a fairly long message " * 10), max_tokens=5)
    assert (len(final.content), final.finish_reason) == (20, "length")


def test_a_prompt_over_the_context_window_overflows() -> None:
    huge = user("x" * (CONTEXT_WINDOW * 4 + 100))
    with pytest.raises(ProviderError) as caught:
        respond(ChatRequest(model="offline-1", messages=[huge]))
    assert (caught.value.code, caught.value.retryable) == ("context_overflow", False)


async def test_stream_yields_the_same_items_as_respond() -> None:
    request = ChatRequest(
        model="offline-1", messages=[user("remember that streams work")], tools=TOOLS
    )
    provider = OfflineProvider()
    items: list[StreamItem] = [item async for item in provider.stream(request)]
    assert items == respond(request)
    assert (provider.name, provider.offline, provider.context_window("offline-1")) == (
        "offline",
        True,
        32_768,
    )


async def test_a_paced_stream_comes_a_word_at_a_time_and_adds_up_to_the_same_reply() -> None:
    request = ChatRequest(
        model="offline-1", messages=[user("Hello there, how are you today?")], tools=TOOLS
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    items = [item async for item in OfflineProvider(words_per_s=200).stream(request)]
    took = loop.time() - started
    deltas = [i for i in items if isinstance(i, StreamDelta)]
    instant = respond(request)
    assert items[-1] == instant[-1]  # the same final message
    assert "".join(d.text for d in deltas) == items[-1].content  # type: ignore[union-attr]
    assert all(len(d.text.split()) == 1 for d in deltas)
    assert len(deltas) > len([i for i in instant if isinstance(i, StreamDelta)])
    assert took >= len(deltas) / 200 * 0.9  # paced: about 5 ms a word


def test_pacing_keeps_tool_call_deltas_whole() -> None:
    items = respond(
        ChatRequest(model="offline-1", messages=[user("remember that tea is green")], tools=TOOLS)
    )
    paced = offline.paced(items)
    calls = [i for i in paced if isinstance(i, StreamDelta) and i.tool_calls]
    assert calls == [i for i in items if isinstance(i, StreamDelta) and i.tool_calls]
    assert paced[-1] == items[-1]


def _fresh_prompt_tokens(request: ChatRequest) -> int:
    """`prompt_tokens` with nothing remembered from earlier requests."""
    offline._READINGS.clear()
    return offline.prompt_tokens(request)


def test_a_request_that_extends_an_earlier_one_reads_the_same_as_a_fresh_one() -> None:
    history = [user(f"message {i} " + "x" * i) for i in range(40)]
    system = {"role": "system", "content": "You are a test."}

    def request(messages: list[dict[str, Any]]) -> ChatRequest:
        return ChatRequest(model="offline-1", messages=messages, tools=TOOLS)

    for end in (5, 6, 12, 40):  # growing, as a session's steps do
        grown = request([dict(system), *history[:end]])  # the system message is rebuilt each time
        assert offline.prompt_tokens(grown) == _fresh_prompt_tokens(grown)
        offline.prompt_tokens(grown)  # remembered for the next, longer request
    compacted = request([dict(system), user("summary of earlier turns"), *history[30:]])
    assert offline.prompt_tokens(compacted) == _fresh_prompt_tokens(compacted)
    edited = [dict(system), *history[:39], user("an edited last message")]
    offline.prompt_tokens(request([dict(system), *history]))
    assert offline.prompt_tokens(request(edited)) == _fresh_prompt_tokens(request(edited))
    recalled = request([dict(system), *history[:3], user(RECALL), *history[3:6]])
    offline.prompt_tokens(request([dict(system), *history[:3], user(RECALL)]))
    extended = offline.recalled_context(recalled.messages)
    offline._READINGS.clear()
    assert extended == offline.recalled_context(recalled.messages)
    assert len(extended) == 3  # the recall message's three lines
