"""YAML read safely, with libyaml's parser where PyYAML was built with it (several times faster)."""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """``yaml.safe_load``, on the C parser when there is one; raises ``yaml.YAMLError`` as it does."""
    return yaml.load(text, Loader=SAFE_LOADER)
