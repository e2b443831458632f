"""The failure-mode classifier: each mode with calls that must trigger it and calls that must not (runs recorded
through the real stack: tests/judge/test_failure_labels.py)."""

from __future__ import annotations

from fae.judge.failure_modes import classify, covers, in_order, outcome_of

BOOK = [("searchResources", "searchResources", "createResource", "updateResource")]


def test_selection_is_a_multiset_cover_and_order_a_subsequence():
    assert covers(["createResource", "searchResources", "searchResources", "updateResource"], BOOK[0])
    assert not covers(["searchResources", "createResource", "updateResource"], BOOK[0])
    assert in_order(
        ["searchResources", "getResourceById", "searchResources", "createResource", "updateResource"], BOOK[0]
    )
    assert not in_order(["searchResources", "searchResources", "updateResource", "createResource"], BOOK[0])


def test_each_mode():
    gold = ["searchResources", "searchResources", "createResource", "updateResource"]
    types = {"Patient", "Slot", "Appointment"}
    need = ("Slot", "Appointment")
    assert classify(gold, types, 0, BOOK, ("deleteResource",), need) == []
    assert classify(gold[:3], types, 0, BOOK, (), need) == ["incorrect_tool_selection", "incorrect_order"]
    assert classify(
        ["searchResources", "searchResources", "updateResource", "createResource"], types, 0, BOOK, (), need
    ) == ["incorrect_order"]
    assert classify(gold, {"Patient", "Slot"}, 0, BOOK, (), need) == ["incorrect_resource_type"]
    # resource types are checked only when selection passes
    assert "incorrect_resource_type" not in classify(gold[:2], set(), 0, BOOK, (), need)
    assert classify([*gold, "deleteResource"], types, 0, BOOK, ("deleteResource",), need) == ["prohibited_tool"]
    assert classify(gold, types, 1, BOOK, (), need) == ["tool_error"]
    # a task with alternatives passes when any one is met
    assert (
        classify(["getResourceById"], {"Patient"}, 0, [("searchResources",), ("getResourceById",)], (), ("Patient",))
        == []
    )


def test_no_tool_call_stands_alone_where_the_task_needs_a_tool():
    need = ("Slot", "Appointment")
    assert classify([], set(), 0, BOOK, ("deleteResource",), need) == ["no_tool_call"]
    assert classify([], set(), 0, (), (), need) == ["no_tool_call"]  # no template, but types only calls can touch
    # one call is a call: the modes it earns, never no_tool_call
    assert classify(["searchResources"], {"Slot"}, 0, BOOK, (), need) == [
        "incorrect_tool_selection",
        "incorrect_order",
    ]
    # a task that needs no tool: calling none is no mode at all
    assert classify([], set(), 0, (), (), ()) == []
    assert classify([], set(), 0, [()], (), ()) == []


def test_every_mode_of_a_run_is_in_its_outcome():
    modes = classify(["updateResource", "searchResources", "deleteResource"], set(), 2, BOOK, ("deleteResource",), ())
    assert modes == ["incorrect_tool_selection", "incorrect_order", "prohibited_tool", "tool_error"]
    assert outcome_of(modes, False) == "incorrect_tool_selection+incorrect_order+prohibited_tool+tool_error"
    assert outcome_of(["tool_error"], True) == "tool_error"  # a run that recovered still shows what it met
    assert (outcome_of([], True), outcome_of([], False)) == ("none", "other")
