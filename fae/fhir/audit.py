"""AuditEvent trail: one AuditEvent per REST interaction, like Medplum's saveAuditEvents."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from fae.fhir.types import Resource

ACTIONS = {"create": "C", "read": "R", "vread": "R", "update": "U", "delete": "D"}
IDENTITY_HEADER = "x-fae-identity"


def identity(headers: dict[str, str]) -> str | None:
    """Who acts: the identity header, else a JWT bearer token's `sub`, else a token fingerprint."""
    explicit = headers.get(IDENTITY_HEADER)
    if explicit:
        return explicit.strip()[:200]
    auth = headers.get("authorization", "")
    if not auth.lower().startswith("bearer "):
        return None
    token = auth[7:].strip()
    parts = token.split(".")
    if len(parts) == 3:
        try:
            padded = parts[1] + "=" * (-len(parts[1]) % 4)
            claims = json.loads(base64.urlsafe_b64decode(padded))
            if isinstance(claims, dict) and isinstance(claims.get("sub"), str):
                return claims["sub"][:200]
        except (ValueError, UnicodeDecodeError):
            pass
    # never store the secret itself: a short fingerprint identifies the caller
    return "token-" + hashlib.sha256(token.encode()).hexdigest()[:16]


def audit_event(interaction: str, entity_ref: str, who: str | None, recorded: str, outcome_code: str = "0") -> Resource:
    agent_who: dict[str, Any] = {"display": who} if who else {"display": "anonymous"}
    if who:
        agent_who["identifier"] = {"system": "urn:fae:identity", "value": who}
    return {
        "resourceType": "AuditEvent",
        "type": {
            "system": "http://terminology.hl7.org/CodeSystem/audit-event-type",
            "code": "rest",
            "display": "RESTful Operation",
        },
        "subtype": [{"system": "http://hl7.org/fhir/restful-interaction", "code": interaction}],
        "action": ACTIONS[interaction],
        "recorded": recorded,
        "outcome": outcome_code,
        "agent": [{"who": agent_who, "requestor": True}],
        "source": {"observer": {"display": "fae embedded FHIR server"}},
        "entity": [{"what": {"reference": entity_ref}}],
    }
