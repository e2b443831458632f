"""The OpenAI wire bodies the scripted LLM serves: a completion and each of its chunks begin alike."""

from __future__ import annotations

import pytest

from fae.llm.behaviours import Reply, ToolCall
from fae.llm.wire import chunks, completion, usage

HEAD = ["id", "object", "created", "model", "system_fingerprint"]
REPLIES = {
    "content": Reply(content="two words"),
    "tool call": Reply(tool_call=ToolCall("call-1", "createResource", {"resourceType": "Patient", "note": "x" * 60})),
}


@pytest.mark.parametrize("reply", REPLIES.values(), ids=list(REPLIES))
def test_a_completion_and_each_chunk_begin_with_the_same_head(reply):
    said = {"completion_id": "chatcmpl-1", "model": "scripted:gold", "created": 7, "token_usage": usage(3, 4)}
    body = completion(reply, **said)
    streamed = list(chunks(reply, **said, n=2))
    assert list(body)[: len(HEAD)] == HEAD and body["object"] == "chat.completion"
    assert len(streamed) > 3
    for chunk in [body, *streamed]:
        assert [chunk[key] for key in HEAD if key != "object"] == ["chatcmpl-1", 7, "scripted:gold", "fae-scripted"]
    for chunk in streamed:
        assert list(chunk)[: len(HEAD)] == HEAD and chunk["object"] == "chat.completion.chunk", chunk
    assert [chunk["choices"] for chunk in streamed].count([]) == 1 and streamed[-1]["choices"] == []
    assert streamed[-1]["usage"] == usage(3, 4) and all(chunk["usage"] is None for chunk in streamed[:-1])
    assert {chunk["choices"][0]["index"] for chunk in streamed[:-1]} == {0, 1}
