"""The fleet the integration tests run against: TASKWIRE_TEST_ADDR (required: the
tests fail without it) and TASKWIRE_TEST_TOKEN (optional bearer token)."""

from __future__ import annotations

import os
import uuid
from typing import Optional

#: Seconds any one task of the scripted fleet may take (debug builds in CI).
PATIENCE = 120.0


def addr() -> str:
    value = os.environ.get("TASKWIRE_TEST_ADDR", "").strip()
    if not value:
        raise AssertionError(
            "TASKWIRE_TEST_ADDR is not set: these tests need a running fleet "
            "(scripts/dev-fleet.sh), e.g. TASKWIRE_TEST_ADDR=http://127.0.0.1:50051"
        )
    return value


def token() -> Optional[str]:
    return os.environ.get("TASKWIRE_TEST_TOKEN") or None


def unique(prefix: str) -> str:
    """A prompt no other test (or run) uses."""
    return f"{prefix} {uuid.uuid4().hex[:12]}"
