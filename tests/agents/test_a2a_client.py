"""How fae reads an A2A task's answers (``FollowedTask``) and which interfaces of a card it reaches."""

from __future__ import annotations

import pytest
from a2a.helpers.proto_helpers import new_text_message, new_text_part
from a2a.types import (
    AgentCard,
    AgentInterface,
    Artifact,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from fae.agents.a2a_client import FollowedTask, proxied_card
from fae.agents.base import AgentError


def _status(state: TaskState, text: str | None = None) -> StreamResponse:
    status = TaskStatus(state=state, message=new_text_message(text) if text else None)
    return StreamResponse(status_update=TaskStatusUpdateEvent(task_id="t1", status=status))


def _artifact(artifact_id: str, text: str, *, append: bool = False) -> StreamResponse:
    artifact = Artifact(artifact_id=artifact_id, parts=[new_text_part(text)])
    return StreamResponse(artifact_update=TaskArtifactUpdateEvent(task_id="t1", artifact=artifact, append=append))


def test_the_artifacts_text_is_the_answer_and_an_append_adds_to_its_artifact():
    followed = FollowedTask()
    for event in (
        StreamResponse(task=Task(id="t1", status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))),
        _status(TaskState.TASK_STATE_WORKING, "looking"),
        _artifact("a", "draft"),
        _artifact("a", "<PATIENT>p1</PATIENT>"),  # no append: replaces the draft
        _artifact("a", "and more", append=True),
        _artifact("b", "second"),
        _status(TaskState.TASK_STATE_COMPLETED, "done"),
    ):
        assert not followed.settled
        followed.take(event)
    assert (followed.task_id, followed.state, followed.settled) == ("t1", "completed", True)
    assert followed.answer() == "<PATIENT>p1</PATIENT>\nand more\nsecond"


def test_without_artifacts_the_final_status_message_is_the_answer_and_a_reply_message_ends_the_task():
    followed = FollowedTask()
    followed.take(_status(TaskState.TASK_STATE_COMPLETED, "registered as p1"))
    assert followed.answer() == "registered as p1"
    silent = FollowedTask()
    silent.take(_status(TaskState.TASK_STATE_WORKING, "looking"))
    silent.take(_status(TaskState.TASK_STATE_COMPLETED))
    assert silent.answer() is None
    reply = FollowedTask()
    reply.take(StreamResponse(message=new_text_message("p1 it is")))
    assert (reply.settled, reply.answer(), reply.task_id) == (True, "p1 it is", None)


@pytest.mark.parametrize(
    ("state", "name"),
    [
        (TaskState.TASK_STATE_FAILED, "failed"),
        (TaskState.TASK_STATE_CANCELED, "canceled"),
        (TaskState.TASK_STATE_REJECTED, "rejected"),
        (TaskState.TASK_STATE_INPUT_REQUIRED, "input-required"),
        (TaskState.TASK_STATE_AUTH_REQUIRED, "auth-required"),
    ],
)
def test_final_and_interrupted_states_settle_the_task_by_their_spec_names(state, name):
    followed = FollowedTask()
    followed.take(_status(state, "why"))
    assert (followed.state, followed.settled, followed.status_text) == (name, True, "why")


def _card(*urls: str) -> AgentCard:
    return AgentCard(name="x", supported_interfaces=[AgentInterface(url=u, protocol_binding="JSONRPC") for u in urls])


def test_only_interfaces_on_the_agents_origin_are_kept_each_reached_through_the_proxy():
    proxied = "http://127.0.0.1:7000/run/r/agent/cap/a2a-x/"
    card = proxied_card(_card("http://10.1.1.1:9/rpc", "http://h:9/a2a/rpc", "https://h:9/rpc"), "http://h:9", proxied)
    assert [i.url for i in card.supported_interfaces] == [proxied + "a2a/rpc"]
    with pytest.raises(AgentError, match=r"names no interface on http://h:9 \(it names: http://elsewhere:9/\)"):
        proxied_card(_card("http://elsewhere:9/"), "http://h:9", proxied)
