"""Write an Inspect AI .eval log of N agent samples shaped like fae's runs (run by Inspect's Python, not fae's).

bench/bench_inspect_score.py runs this with ``--inspect-python``; it imports Inspect only, never fae.
Each sample is one agent run built with Inspect's own classes: a system and a user message, four
tool turns (search, read, search, create) whose tool messages carry FHIR-like JSON (Bundles of
Patients and Observations, a created Condition), and a final assistant answer; its events are a
ModelEvent per model turn (input: the conversation so far, as Inspect logs it) and a ToolEvent per
call. ``write_eval_log`` condenses each sample as a real eval's recorder does (repeated messages
pooled, large content moved to attachments). The Observation search grows until the sample's
content reaches --sample-bytes. One sample in five answers wrong, so scores vary.

    PYTHON bench/inspect_eval_log.py OUT.eval N --sample-bytes B
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta

from inspect_ai.event import ModelEvent, ToolEvent
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalPlanStep,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    read_eval_log,
    read_eval_log_sample,
    write_eval_log,
)
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    ModelOutput,
)
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall, ToolInfo, ToolParams

MODEL = "mockllm/model"
FAMILIES = ["Vasquez", "Okafor", "Lindqvist", "Tanaka", "Moreau", "Haddad", "Novak", "Silva", "Kowalski", "Byrne"]
GIVEN = ["Beatriz", "Chidi", "Astrid", "Kenji", "Elodie", "Omar", "Petra", "Rui", "Zofia", "Aoife"]
CODES = [("718-7", "Hemoglobin", "g/dL"), ("2339-0", "Glucose", "mg/dL"), ("2160-0", "Creatinine", "mg/dL")]
START = datetime(2026, 1, 1, tzinfo=UTC)


def uid(rng: random.Random) -> str:
    return "%08x-%04x-4%03x-8%03x-%012x" % (  # noqa: UP031 - a FHIR-ish uuid from the seeded generator
        rng.getrandbits(32),
        rng.getrandbits(16),
        rng.getrandbits(12),
        rng.getrandbits(12),
        rng.getrandbits(48),
    )


def meta(rng: random.Random) -> dict:
    stamp = START + timedelta(seconds=rng.randrange(10**7))
    return {"versionId": str(rng.randrange(1, 4)), "lastUpdated": stamp.isoformat().replace("+00:00", "Z")}


def patient(rng: random.Random) -> dict:
    return {
        "resourceType": "Patient",
        "id": uid(rng),
        "meta": meta(rng),
        "name": [{"family": rng.choice(FAMILIES), "given": [rng.choice(GIVEN)]}],
        "gender": rng.choice(["female", "male"]),
        "birthDate": f"{rng.randrange(1930, 2010)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
        "telecom": [{"system": "phone", "value": f"555-{rng.randrange(1000):03d}-{rng.randrange(10000):04d}"}],
        "address": [{"line": [f"{rng.randrange(1, 200)} Mill Lane"], "city": "Madison", "postalCode": "30922"}],
    }


def observation(rng: random.Random, subject: str) -> dict:
    code, name, unit = rng.choice(CODES)
    when = START + timedelta(seconds=rng.randrange(10**7))
    return {
        "resourceType": "Observation",
        "id": uid(rng),
        "meta": meta(rng),
        "status": "final",
        "category": [{"coding": [{"system": "http://terminology.hl7.org/CodeSystem/observation-category",
                                  "code": "laboratory"}]}],
        "code": {"coding": [{"system": "http://loinc.org", "code": code, "display": name}], "text": name},
        "subject": {"reference": f"Patient/{subject}"},
        "effectiveDateTime": when.isoformat(),
        "valueQuantity": {"value": round(rng.uniform(0.5, 200), 1), "unit": unit, "system": "http://unitsofmeasure.org"},
    }  # fmt: skip


def bundle(rng: random.Random, resources: list[dict]) -> dict:
    return {
        "resourceType": "Bundle",
        "id": uid(rng),
        "type": "searchset",
        "total": len(resources),
        "entry": [
            {
                "fullUrl": f"http://fhir.local/fhir/{r['resourceType']}/{r['id']}",
                "resource": r,
                "search": {"mode": "match"},
            }
            for r in resources
        ],
    }


TOOLS = [
    ToolInfo(name=name, description=text, parameters=ToolParams())
    for name, text in [
        ("search_resources", "Search FHIR resources of one type with search parameters."),
        ("read_resource", "Read one FHIR resource by type and id."),
        ("create_resource", "Create a FHIR resource from its JSON body."),
    ]
]


def sample(index: int, size: int) -> EvalSample:
    """One agent run: five model turns, four tool calls, a final answer; content of about ``size`` bytes."""
    rng = random.Random(index)
    people = [patient(rng) for _ in range(rng.randrange(2, 5))]
    chosen = people[0]
    family = chosen["name"][0]["family"]
    prompt = (
        f"Patient {chosen['name'][0]['given'][0]} {family}, born {chosen['birthDate']}, has a new lab result. "
        "Find the patient, read their latest laboratory Observations, record a Condition for anaemia if the "
        "latest hemoglobin is below 12 g/dL, and answer with the latest hemoglobin value as a number."
    )
    observations: list[dict] = []
    used = len(prompt) + len(json.dumps(people)) + 1500  # prompts, calls and the created Condition
    while used < size or not observations:
        observations.append(observation(rng, chosen["id"]))
        used += len(json.dumps(observations[-1])) + 90
    hemoglobin = [o for o in observations if o["code"]["coding"][0]["code"] == "718-7"]
    value = str(hemoglobin[-1]["valueQuantity"]["value"]) if hemoglobin else "none"
    condition = {
        "resourceType": "Condition",
        "id": uid(rng),
        "meta": meta(rng),
        "clinicalStatus": {"coding": [{"code": "active"}]},
        "verificationStatus": {"coding": [{"code": "confirmed"}]},
        "code": {"coding": [{"system": "http://snomed.info/sct", "code": "271737000", "display": "Anemia"}]},
        "subject": {"reference": f"Patient/{chosen['id']}"},
    }
    calls = [
        ("search_resources", {"resourceType": "Patient", "params": {"family": family}}, bundle(rng, people)),
        ("read_resource", {"resourceType": "Patient", "id": chosen["id"]}, chosen),
        ("search_resources", {"resourceType": "Observation", "params": {"subject": chosen["id"]}},
         bundle(rng, observations)),
        ("create_resource", {"resourceType": "Condition", "body": {**condition, "id": None}}, condition),
    ]  # fmt: skip
    messages: list[ChatMessage] = [
        ChatMessageSystem(content="You act on a FHIR R4 server through the tools given. End with FINAL ANSWER."),
        ChatMessageUser(content=prompt),
    ]
    events: list = []
    for turn, (function, arguments, result) in enumerate(calls):
        call = ToolCall(id=f"call_{index}_{turn}", function=function, arguments=arguments)
        reply = ChatMessageAssistant(content="", tool_calls=[call], model=MODEL)
        output = ModelOutput.from_message(reply)
        events.append(
            ModelEvent(
                model=MODEL,
                input=list(messages),
                tools=TOOLS,
                tool_choice="auto",
                config=GenerateConfig(),
                output=output,
            )
        )
        text = json.dumps(result)
        messages += [reply, ChatMessageTool(content=text, tool_call_id=call.id, function=function)]
        events.append(ToolEvent(id=call.id, function=function, arguments=arguments, result=text))
    wrong = index % 5 == 4
    answer = (
        f"Latest hemoglobin recorded; Condition/{condition['id']} created. FINAL ANSWER: {'0.0' if wrong else value}"
    )
    output = ModelOutput.from_content(model=MODEL, content=answer)
    events.append(
        ModelEvent(
            model=MODEL, input=list(messages), tools=TOOLS, tool_choice="auto", config=GenerateConfig(), output=output
        )
    )
    messages.append(output.message)
    return EvalSample(
        id=index + 1,
        epoch=1,
        input=prompt,
        target=value,
        messages=messages,
        output=output,
        events=events,
        scores={"match": Score(value="I" if wrong else "C", answer="0.0" if wrong else value)},
    )


def build(path: str, count: int, size: int) -> None:
    now = START.isoformat()
    spec = EvalSpec(
        created=now,
        task="fhir_agent",
        dataset=EvalDataset(name="fhir_agent", samples=count, sample_ids=list(range(1, count + 1))),
        model=MODEL,
        config=EvalConfig(),
    )
    accuracy = sum(i % 5 != 4 for i in range(count)) / count
    log = EvalLog(
        eval=spec,
        status="success",
        plan=EvalPlan(name="plan", steps=[EvalPlanStep(solver="react")]),
        results=EvalResults(
            total_samples=count,
            completed_samples=count,
            scores=[
                EvalScore(
                    name="match", scorer="match", metrics={"accuracy": EvalMetric(name="accuracy", value=accuracy)}
                )
            ],
        ),
        stats=EvalStats(started_at=now, completed_at=now),
        samples=[sample(i, size) for i in range(count)],
    )
    write_eval_log(log, path)


def check(path: str, count: int) -> dict:
    """Read the written log back with Inspect's readers: the header's counts and a sample's output and target."""
    header = read_eval_log(path, header_only=True)
    assert header.results is not None and header.results.total_samples == count, header.results
    last = read_eval_log_sample(path, id=count, epoch=1)
    assert last.output.completion.endswith("FINAL ANSWER: " + ("0.0" if (count - 1) % 5 == 4 else last.target)), last
    return {"samples": header.results.total_samples, "messages": len(last.messages), "events": len(last.events)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("count", type=int)
    parser.add_argument("--sample-bytes", type=int, required=True, help="content bytes a sample carries (about)")
    parser.add_argument("--check", action="store_true", help="only read an existing log back and check it")
    args = parser.parse_args()
    began = time.perf_counter()
    if not args.check:
        build(args.out, args.count, args.sample_bytes)
    built = time.perf_counter() - began
    found = check(args.out, args.count)
    json.dump({**found, "build_s": built, "check_s": time.perf_counter() - began - built}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
