"""The failure-mode classifier: each mode with calls that must trigger it and calls that must not."""

from __future__ import annotations

from fae.judge.failure_modes import classify, covers, in_order

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
