"""Building a variation's seed: ids, unambiguous names, people, distractors, the clock block."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from random import Random
from typing import Any

import msgspec

GIVEN = {
    "female": [
        "Amara",
        "Beatriz",
        "Chloe",
        "Dalia",
        "Elena",
        "Fatima",
        "Greta",
        "Hana",
        "Ingrid",
        "Julia",
        "Keiko",
        "Leila",
        "Maren",
        "Nadia",
        "Olivia",
        "Priya",
        "Rosa",
        "Sofia",
        "Tamsin",
        "Uma",
        "Vera",
        "Wanjiru",
        "Yara",
        "Zofia",
    ],
    "male": [
        "Aarav",
        "Bruno",
        "Caleb",
        "Dmitri",
        "Emeka",
        "Felix",
        "Goran",
        "Hugo",
        "Ivan",
        "Jonas",
        "Kofi",
        "Luca",
        "Mateo",
        "Nils",
        "Omar",
        "Pavel",
        "Rafael",
        "Samir",
        "Tomas",
        "Ulrich",
        "Victor",
        "Wei",
        "Yusuf",
        "Zane",
    ],
}
FAMILY = [
    "Abara",
    "Bergstrom",
    "Castellano",
    "Dimitrov",
    "Eklund",
    "Fairweather",
    "Gallagher",
    "Haddad",
    "Ivanova",
    "Jablonski",
    "Kowalczyk",
    "Lindqvist",
    "Moreau",
    "Nakamura",
    "Okonkwo",
    "Petrovic",
    "Quintero",
    "Rasmussen",
    "Szabo",
    "Thorne",
    "Umarov",
    "Varga",
    "Whitfield",
    "Xu",
    "Yilmaz",
    "Zielinski",
    "Achterberg",
    "Brannigan",
    "Delacroix",
    "Esposito",
    "Fitzgerald",
    "Grunwald",
    "Holloway",
    "Iwasaki",
    "Jovanovic",
    "Kensington",
    "Lombardi",
    "Mbeki",
    "Novak",
    "Oyelaran",
    "Pemberton",
    "Rourke",
    "Sandoval",
    "Trevino",
    "Vasquez",
    "Wexler",
    "Yamada",
    "Zoltan",
]
CITIES = ["Boston", "Denver", "Portland", "Austin", "Madison", "Raleigh"]
STREETS = ["Elm Street", "Harbor Road", "Maple Avenue", "Mill Lane", "Oak Court", "Ridge Way"]

SNOMED = "http://snomed.info/sct"
LOINC = "http://loinc.org"
ROLE = "http://terminology.hl7.org/CodeSystem/v3-RoleCode"
LANG = "urn:ietf:bcp:47"

# Distractor observations: LOINC code, display, unit, low, high.
VITALS = [
    ("8867-4", "Heart rate", "/min", 55, 95),
    ("8310-5", "Body temperature", "Cel", 36, 38),
    ("29463-7", "Body weight", "kg", 50, 110),
    ("9279-1", "Respiratory rate", "/min", 12, 20),
]


def zulu(moment: datetime) -> str:
    """An aware datetime as FHIR dateTime in UTC with seconds (``2025-03-04T09:00:00Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def clock_block(now: datetime) -> str:
    """The prompt's date and time block, written only from the variation's fixed now."""
    return (
        f"Current date and time: {now.strftime('%A')} {now.day} {now.strftime('%B %Y, %H:%M')} UTC "
        f"({zulu(now)}). Treat this as now; all times are UTC."
    )


class World:
    """A variation's resources under construction, with ids and names that never repeat."""

    def __init__(self, rng: Random, now: datetime):
        self.rng = rng
        self.now = now
        self.today = now.date()
        self.resources: list[dict[str, Any]] = []
        self._ids: set[str] = set()
        self._families: set[str] = set()

    # ---- identity

    def new_id(self, prefix: str) -> str:
        """A fresh client id such as ``pat-3f9a1c``."""
        while True:
            rid = f"{prefix}-{self.rng.randrange(16**6):06x}"
            if rid not in self._ids:
                self._ids.add(rid)
                return rid

    def name(self, gender: str | None = None) -> tuple[str, str, str]:
        """(given, family, gender) with a family name no one else in this world has."""
        gender = gender or self.rng.choice(["female", "male"])
        family = self.rng.choice([f for f in FAMILY if f not in self._families])
        self._families.add(family)
        return self.rng.choice(GIVEN[gender]), family, gender

    def birth_date(self, low: int = 20, high: int = 85) -> str:
        """A birth date making the person between low and high years old."""
        return (self.today - timedelta(days=self.rng.randrange(low * 365, high * 365))).isoformat()

    def add(self, resource: dict[str, Any]) -> dict[str, Any]:
        """Keep a resource in the seed; returns it."""
        self._ids.add(resource["id"])
        self.resources.append(resource)
        return resource

    def day(self, offset: int) -> date:
        """Today plus offset days."""
        return self.today + timedelta(days=offset)

    def at(self, day: date, hour: int, minute: int = 0) -> datetime:
        """An aware UTC datetime on a day."""
        return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)

    # ---- people

    def patient(
        self,
        *,
        gender: str | None = None,
        given: str | None = None,
        family: str | None = None,
        birth_date: str | None = None,
    ) -> dict[str, Any]:
        """A patient with a unique family name (unless one is given), phone and address."""
        g, f, gender = self.name(gender)
        return self.add(
            {
                "resourceType": "Patient",
                "id": self.new_id("pat"),
                "active": True,
                "name": [{"use": "official", "family": family or f, "given": [given or g]}],
                "gender": gender,
                "birthDate": birth_date or self.birth_date(),
                "telecom": [{"system": "phone", "value": self.phone(), "use": "mobile"}],
                "address": [self.address()],
            }
        )

    def practitioner(
        self, *, gender: str | None = None, language: str = "en", city: str | None = None
    ) -> dict[str, Any]:
        """A physician with a unique family name, a spoken language and a city."""
        given, family, gender = self.name(gender)
        return self.add(
            {
                "resourceType": "Practitioner",
                "id": self.new_id("prac"),
                "active": True,
                "name": [{"family": family, "given": [given], "prefix": ["Dr."]}],
                "gender": gender,
                "address": [self.address(city)],
                "communication": [{"coding": [{"system": LANG, "code": language}]}],
            }
        )

    def phone(self) -> str:
        """A fictional 555 phone number."""
        return f"555-{self.rng.randrange(100, 1000)}-{self.rng.randrange(1000, 10000)}"

    def address(self, city: str | None = None) -> dict[str, Any]:
        """A street address in one of the world's cities."""
        return {
            "line": [f"{self.rng.randrange(1, 400)} {self.rng.choice(STREETS)}"],
            "city": city or self.rng.choice(CITIES),
            "postalCode": f"{self.rng.randrange(10000, 99999)}",
            "country": "US",
        }

    # ---- noise

    def distractors(self, count: int = 20) -> list[dict[str, Any]]:
        """Irrelevant but realistic resources: other patients, their vitals and an insurer or two."""
        made: list[dict[str, Any]] = []
        patients = [self.patient() for _ in range(max(4, count // 3))]
        made.extend(patients)
        while len(made) < count:
            subject = self.rng.choice(patients)
            code, display, unit, low, high = self.rng.choice(VITALS)
            when = self.at(self.day(-self.rng.randrange(1, 400)), self.rng.randrange(8, 17))
            made.append(
                self.add(
                    {
                        "resourceType": "Observation",
                        "id": self.new_id("obs"),
                        "status": "final",
                        "code": {
                            "coding": [{"system": LOINC, "code": code, "display": display}],
                            "text": display,
                        },
                        "subject": {"reference": f"Patient/{subject['id']}"},
                        "effectiveDateTime": zulu(when),
                        "valueQuantity": {
                            "value": self.rng.randrange(low, high),
                            "unit": unit,
                            "system": "http://unitsofmeasure.org",
                            "code": unit,
                        },
                    }
                )
            )
        return made

    def bundle(self) -> dict[str, Any]:
        """The seed as a transaction Bundle that PUTs every resource at its client id."""
        # A JSON round trip copies plain data several times faster than deepcopy.
        return msgspec.json.decode(
            msgspec.json.encode(
                {
                    "resourceType": "Bundle",
                    "type": "transaction",
                    "entry": [
                        {
                            "resource": r,
                            "request": {"method": "PUT", "url": f"{r['resourceType']}/{r['id']}"},
                        }
                        for r in self.resources
                    ],
                }
            )
        )


def display_name(resource: dict[str, Any]) -> str:
    """``Given Family`` of a person resource."""
    name = resource["name"][0]
    return f"{' '.join(name.get('given', []))} {name['family']}"
