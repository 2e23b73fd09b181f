from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.imports.helpers import api_client


@pytest.fixture
def bob(users: dict[str, Any]) -> Any:
    return users["bob"]


@pytest.fixture
def alice_api(alice: Any) -> Client:
    return api_client(alice)


@pytest.fixture
def bob_api(bob: Any) -> Client:
    return api_client(bob)
