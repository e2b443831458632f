"""Names for the JSON shapes the FHIR server passes around, so signatures say what they carry."""

from __future__ import annotations

from typing import Any

# a FHIR resource (or any JSON object from a FHIR body) as decoded JSON
Resource = dict[str, Any]

# the values a resource version holds for one search parameter; the shape depends on the
# parameter's type (see search_values.build_index), so readers index it by that type
SearchIndex = Any

__all__ = ["Resource", "SearchIndex"]
