"""How many tokens the agent's LLM calls used, as SQL that every view and table shares.

A call's tokens are *known* when fae reads its API (``USAGE_KNOWN_APIS``) and either its answer reported usage
or it spent none: the upstream refused it with an HTTP error (429, 400, 500: nothing is billed and no usage comes
back), or it only listed models or counted tokens. Any other call has *unknown* tokens: an API fae does not read,
no answer at all (a timeout, a dropped connection: the model may have worked on the prompt), or an answer with no
usage (a stream sent without usage, a body that is not JSON). A run that made no LLM call used 0 tokens; a run
with one call of unknown tokens has an unknown total (NULL), never a part-sum. docs/log.md, "Token counts".

The fragments read the columns ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` (BIGINT), ``status``
(INTEGER) and ``api`` of one ``LlmCalled`` payload, which ``usage_columns`` makes from a payload parsed once by
``json_extract_string(payload, usage_paths())``.
"""

from __future__ import annotations

from fae.store.events import USAGE_KNOWN_APIS

KNOWN_APIS_SQL = ", ".join(f"'{api}'" for api in USAGE_KNOWN_APIS)
_PATHS = ("$.prompt_tokens", "$.completion_tokens", "$.total_tokens", "$.status", "$.api")


def usage_paths(*more: str) -> str:
    """The SQL list of JSON paths ``usage_columns`` reads, then ``more`` (from the sixth item on)."""
    return "[" + ", ".join(f"'{path}'" for path in (*_PATHS, *more)) + "]"


def usage_columns(fields: str) -> str:
    """The five columns the fragments read, from ``fields``: ``json_extract_string(payload, usage_paths())``."""
    return (
        f"CAST({fields}[1] AS BIGINT) AS prompt_tokens, CAST({fields}[2] AS BIGINT) AS completion_tokens, "
        f"CAST({fields}[3] AS BIGINT) AS total_tokens, TRY_CAST({fields}[4] AS INTEGER) AS status, "
        f"{fields}[5] AS api"
    )


REPORTED = "(prompt_tokens IS NOT NULL OR completion_tokens IS NOT NULL OR total_tokens IS NOT NULL)"
SPENT_NONE = "(coalesce(status >= 400, false) OR coalesce(api IN ('models', 'count_tokens'), false))"
CALL_KNOWN = f"(coalesce(api IN ({KNOWN_APIS_SQL}), false) AND ({REPORTED} OR {SPENT_NONE}))"
"""The call's tokens are known (a boolean, never NULL)."""

CALL_PROMPT = f"CASE WHEN {CALL_KNOWN} THEN coalesce(prompt_tokens, 0) END"
CALL_COMPLETION = f"CASE WHEN {CALL_KNOWN} THEN coalesce(completion_tokens, 0) END"
CALL_TOTAL = (
    f"CASE WHEN {CALL_KNOWN} THEN coalesce(total_tokens, coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)) "
    "END"
)
"""The call's tokens: the answer's total, else prompt + completion; 0 for a call that spent none; NULL unknown."""


def run_sum(call: str) -> str:
    """An aggregate over one run's calls: the sum of ``call`` (0 with no call), NULL if one call is unknown."""
    return f"CASE WHEN coalesce(bool_and({CALL_KNOWN}), true) THEN coalesce(sum({call}), 0) END"


UNKNOWN_CALLS = f"count(*) FILTER (WHERE NOT {CALL_KNOWN})"
"""An aggregate: how many of the calls have unknown tokens."""
