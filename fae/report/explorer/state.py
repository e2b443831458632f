"""A run's FHIR state from seed to end, from the log alone: the resources the seed put in the sandbox against
those the harness read back after the run, as added, removed and changed (a line diff of each changed one).

``meta`` (versionId, lastUpdated: the server's bookkeeping, different on every write) is left out of the
comparison so a diff shows what the agent changed, not what the server stamped.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from fae.report.explorer.markup import pretty, text
from fae.store import events as ev

Key = tuple[str, str]
STATE = "SELECT payload FROM events WHERE run_id = ? AND kind IN ('SandboxSeeded', 'StateCaptured') ORDER BY seq"


def _resources(found: Any) -> dict[Key, dict[str, Any]]:
    """Resources keyed by (type, id), from a seed Bundle or a list read back."""
    if isinstance(found, dict) and found.get("resourceType") == "Bundle":
        found = [entry.get("resource") for entry in found.get("entry") or [] if isinstance(entry, dict)]
    if not isinstance(found, list):
        return {}
    return {
        (str(item["resourceType"]), str(item["id"])): item
        for item in found
        if isinstance(item, dict) and item.get("resourceType") and item.get("id")
    }


def _compared(resource: dict[str, Any]) -> list[str]:
    kept = {k: v for k, v in resource.items() if k != "meta"}
    return json.dumps(kept, indent=2, sort_keys=True, default=str).splitlines()


def _diff(before: dict[str, Any], after: dict[str, Any]) -> str:
    lines = []
    for changed in difflib.unified_diff(_compared(before), _compared(after), "seed", "end", n=2, lineterm=""):
        kind = "diff-add" if changed.startswith("+") else "diff-del" if changed.startswith("-") else ""
        lines.append(f'<span class="{kind}">{text(changed)}</span>' if kind else text(changed))
    return "<pre>" + "\n".join(lines) + "</pre>"


def _loaded(reader: Any, digest: str | None) -> Any:
    data = reader.blob(digest) if digest else None
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None


def state_html(reader: Any, run_id: str) -> str:
    """The section's content: what changed, or why the log cannot say."""
    seed_blob = state_blob = None
    for (payload,) in reader.query(STATE, [run_id])[1]:
        event = ev.decode(payload)
        if isinstance(event, ev.SandboxSeeded):
            seed_blob = event.seed_blob
        elif isinstance(event, ev.StateCaptured):
            state_blob = event.state_blob
    if seed_blob is None or state_blob is None:
        missing = " and ".join(n for n, b in (("seed", seed_blob), ("end state", state_blob)) if b is None)
        return f'<p class="note">The log holds no {missing} for this run, so no diff.</p>'
    seed, end = _resources(_loaded(reader, seed_blob)), _resources(_loaded(reader, state_blob))
    added = sorted(set(end) - set(seed))
    removed = sorted(set(seed) - set(end))
    changed = sorted(k for k in set(seed) & set(end) if _compared(seed[k]) != _compared(end[k]))
    same = len(set(seed) & set(end)) - len(changed)
    parts = [
        f'<p class="note">{len(seed)} resources seeded, {len(end)} at the end: {len(added)} added, '
        f"{len(removed)} removed, {len(changed)} changed, {same} unchanged (meta left out of the comparison).</p>"
    ]
    for key in added:
        parts.append(
            f'<details><summary class="diff-add">+ {text("/".join(key))}</summary>{pretty(end[key])}</details>'
        )
    for key in removed:
        parts.append(
            f'<details><summary class="diff-del">− {text("/".join(key))}</summary>{pretty(seed[key])}</details>'
        )
    for key in changed:
        parts.append(f"<details open><summary>~ {text('/'.join(key))}</summary>{_diff(seed[key], end[key])}</details>")
    return "".join(parts)
