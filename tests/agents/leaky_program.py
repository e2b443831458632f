"""A program agent that sends its key the old way (``x-api-key``), then prints it: neither may reach the log."""

import os
import sys
import urllib.request

key = os.environ["ANTHROPIC_API_KEY"]
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/models",
    headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
)
with urllib.request.urlopen(request) as reply:
    print(f"models: HTTP {reply.status}", file=sys.stderr)
print(f"my key is {key}", file=sys.stderr)
print(f"done with {key}")
