"""What a request lets the assistant do with tools, checked as the OpenAI API checks ``tools``/``tool_choice``.

With no ``tools`` or ``tool_choice: "none"`` a reply is text only: a scripted
move that would call a tool says, in words, which call it would make. A
``tool_choice`` naming a function forces that function: a scripted plan whose
next move is that call makes it; one whose next move is another call or its
answer cannot be forced, and the request is refused with a 400 that says so.
``"required"`` likewise refuses a move that is an answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from fae.llm.behaviours import Reply

MAX_CHOICES = 128
Mode = Literal["none", "auto", "required", "function"]


class RequestRefused(Exception):
    """A request the API would refuse (400), with the parameter at fault."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ToolPolicy:
    """The tools a request offers and what its ``tool_choice`` asks for."""

    mode: Mode
    offered: tuple[str, ...] = ()
    forced: str | None = None


def _tool_name(tool: Any) -> str | None:
    """A function tool's name, in the chat (``function.name``) or Responses (``name``) shape."""
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        return None
    inner = tool.get("function")
    function = inner if isinstance(inner, dict) else tool
    name = function.get("name")
    return name if isinstance(name, str) and name else None


def tool_policy(body: dict[str, Any]) -> ToolPolicy:
    """The request's tool policy; RequestRefused where the API would answer 400."""
    tools = body.get("tools")
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise RequestRefused("'tools' must be a list of function tools", "tools")
    offered = []
    for index, tool in enumerate(tools):
        name = _tool_name(tool)
        if name is None:
            raise RequestRefused(f"tools[{index}] is not a function tool with a name", f"tools[{index}]")
        offered.append(name)
    choice = body.get("tool_choice")
    if choice is None:
        return ToolPolicy("auto" if offered else "none", tuple(offered))
    if choice in ("none", "auto"):
        return ToolPolicy("none" if choice == "none" or not offered else "auto", tuple(offered))
    if not offered:
        raise RequestRefused("'tool_choice' other than 'none' or 'auto' needs 'tools'", "tool_choice")
    if choice == "required":
        return ToolPolicy("required", tuple(offered))
    forced = _tool_name(choice) if isinstance(choice, dict) and choice.get("type") == "function" else None
    if forced is None:
        raise RequestRefused(
            "'tool_choice' must be 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': ...}}",
            "tool_choice",
        )
    if forced not in offered:
        raise RequestRefused(f"'tool_choice' names the function {forced!r}, which is not in 'tools'", "tool_choice")
    return ToolPolicy("function", tuple(offered), forced)


def choice_count(body: dict[str, Any]) -> int:
    """How many choices the request asks for (``n``, 1 to 128)."""
    n = body.get("n")
    if n is None:
        return 1
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_CHOICES:
        raise RequestRefused(f"'n' must be a whole number from 1 to {MAX_CHOICES}, got {n!r}", "n")
    return n


def shaped(reply: Reply, policy: ToolPolicy, model: str) -> Reply:
    """``reply`` as the policy allows it: text instead of a call when tools are off; refused when unforceable."""
    call = reply.tool_call
    if policy.mode == "none":
        if call is None:
            return reply
        arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        return Reply(
            content=f"Tools are off for this request. My next step would be to call {call.name} with {arguments}."
        )
    if policy.mode == "function" and (call is None or call.name != policy.forced):
        move = f"a call to {call.name}" if call is not None else "its answer"
        raise RequestRefused(
            f"scripted model {model} cannot be forced to call {policy.forced!r}: its next move is {move}", "tool_choice"
        )
    if policy.mode == "required" and call is None:
        raise RequestRefused(
            f"scripted model {model} cannot make a required tool call: its next move is its answer", "tool_choice"
        )
    return reply
