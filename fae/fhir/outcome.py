"""OperationOutcome bodies and the exception that carries one up to the HTTP answer."""

from __future__ import annotations

from typing import Any

from fae.fhir.types import Resource

ISSUE_CODES = {
    400: "invalid",
    404: "not-found",
    405: "not-supported",
    406: "not-supported",
    409: "conflict",
    410: "deleted",
    412: "conflict",
    413: "too-costly",
    415: "not-supported",
    422: "processing",
}


def issue(severity: str, code: str, diagnostics: str, expression: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"severity": severity, "code": code, "diagnostics": diagnostics}
    if expression:
        out["expression"] = [expression]
    return out


def outcome(*issues: dict[str, Any]) -> Resource:
    return {"resourceType": "OperationOutcome", "issue": list(issues)}


class FhirProblem(Exception):
    """A client-facing failure: an HTTP status and the OperationOutcome issues that explain it."""

    def __init__(
        self,
        status: int,
        diagnostics: str,
        *,
        expression: str | None = None,
        code: str | None = None,
        issues: list[dict] | None = None,
    ):
        super().__init__(diagnostics)
        self.status = status
        self.issues = issues or [issue("error", code or ISSUE_CODES.get(status, "processing"), diagnostics, expression)]

    def outcome(self) -> Resource:
        return outcome(*self.issues)
