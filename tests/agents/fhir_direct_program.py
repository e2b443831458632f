"""A program agent that reads FHIR itself, at the base its run gives it where the task allows (FAE_FHIR_BASE)."""

import json
import os
import urllib.request

with urllib.request.urlopen(os.environ["FAE_FHIR_BASE"] + "/Patient?_summary=count") as reply:
    print(json.load(reply)["total"])
