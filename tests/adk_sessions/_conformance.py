# Copyright 2026 Google LLC
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# Vendored for mindstore from github.com/CloudEngineHub/adk-python, commit
# d9f4d3d288257593471fc708a9ab851779005ca5, tests/unittests/sessions/_conformance.py.
# Changed: the registry lists ADK's in-memory backends (the reference) and mindstore;
# the SQL, SQLite, Redis and per-agent database backends are left out (their drivers are
# not installed, and they are ADK's to test). A backend's `make` takes a store:
# mindstore's is the suite's `store` fixture (MINDSTORE_TEST_URI runs it on a server).
# ruff: noqa

"""Backend registry behind the shared session service contract tests.

Every test that takes the ``session_service`` fixture states a behavior all
``BaseSessionService`` implementations owe their callers. A backend is only
held to those behaviors once it is registered here, so one left out of this
list can drift from the contract with no test disagreeing.

A backend that fails a contract test has to record it in ``divergences`` with
a written reason. The test is then marked ``xfail(strict=True)``, so the entry
becomes a defect anyone can pick up, and whoever fixes the backend has to
delete the entry in the same change.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from collections.abc import Callable
from collections.abc import Mapping
import contextlib
import dataclasses

from google.adk.features import FeatureName
from google.adk.features import override_feature_enabled
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
import pytest

from mindstore import Store
from mindstore.integrations.adk import MindstoreSessionService

_MakeService = Callable[
    [Store],
    contextlib.AbstractAsyncContextManager[BaseSessionService],
]

TENANT = 'adk-conformance'
_current: list[MindstoreSessionService] = []


def mindstore_service() -> MindstoreSessionService:
  """The mindstore service of the running test (the swap for the database tests)."""
  return _current[-1]


@dataclasses.dataclass(frozen=True)
class _Backend:
  """A session service implementation held to the shared contract."""

  name: str
  make: _MakeService
  divergences: Mapping[str, str] = dataclasses.field(default_factory=dict)
  """Contract test name -> the written reason this backend fails it today."""


@contextlib.asynccontextmanager
async def _make_in_memory(
    store: Store,
) -> AsyncIterator[BaseSessionService]:
  del store
  yield InMemorySessionService()


@contextlib.asynccontextmanager
async def _make_in_memory_light_copy(
    store: Store,
) -> AsyncIterator[BaseSessionService]:
  del store
  override_feature_enabled(
      FeatureName.IN_MEMORY_SESSION_SERVICE_LIGHT_COPY, True
  )
  try:
    yield InMemorySessionService()
  finally:
    override_feature_enabled(
        FeatureName.IN_MEMORY_SESSION_SERVICE_LIGHT_COPY, False
    )


@contextlib.asynccontextmanager
async def _make_mindstore(
    store: Store,
) -> AsyncIterator[BaseSessionService]:
  yield MindstoreSessionService(store.scoped(TENANT))


BACKENDS = [
    _Backend('in_memory', _make_in_memory),
    _Backend('in_memory_light_copy', _make_in_memory_light_copy),
    _Backend('mindstore', _make_mindstore),
]


@pytest.fixture(params=BACKENDS, ids=lambda backend: backend.name)
async def session_service(
    request: pytest.FixtureRequest, store: Store
) -> AsyncIterator[BaseSessionService]:
  """Yields each registered backend in turn, xfailing its known divergences."""
  backend: _Backend = request.param
  divergence = backend.divergences.get(request.node.originalname)
  if divergence is not None:
    request.node.add_marker(pytest.mark.xfail(strict=True, reason=divergence))
  async with backend.make(store) as service:
    yield service
