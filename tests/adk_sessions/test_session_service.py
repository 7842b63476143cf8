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
# Vendored for mindstore from github.com/CloudEngineHub/adk-python (a fork of
# google/adk-python at ADK 2.7.1), commit d9f4d3d288257593471fc708a9ab851779005ca5,
# tests/unittests/sessions/test_session_service.py; Apache License 2.0 (header above).
# What changed, and only this (test bodies are as upstream wrote them):
# * kept: every test that takes the shared `session_service` fixture (the contract,
#   run on each backend `_conformance.BACKENDS` lists), the two in-memory dedupe tests
#   (their `@pytest.mark.parametrize('session_service', [InMemorySessionService()])`
#   removed, so they run on every registered backend too), the two configuration tests,
#   and five tests written for the database backends that use only the public interface,
#   run on mindstore: `get_session_service` returns the mindstore service of the running
#   test and `DatabaseSessionService` names `MindstoreSessionService` (the swap);
# * left out: the tests of other backends' internals (see tests/adk_sessions/README.md);
# * imports of sqlalchemy and of the SQL/Vertex backends removed (not installed, unused).
# ruff: noqa

import asyncio
from contextlib import asynccontextmanager
from datetime import datetime
from datetime import timezone
import enum
import inspect
import os
import time
from unittest import mock
import warnings

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types
import pytest

# the swap: the database tests kept here run on mindstore
from mindstore.integrations.adk import MindstoreSessionService as DatabaseSessionService

# Tests below that take `session_service` run once per backend registered in
# _conformance; each states a behavior every backend owes its callers.
from . import _conformance
from ._conformance import session_service  # noqa: F401


def test_get_session_config_rejects_negative_num_recent_events():
  """A negative recent-event limit is rejected at configuration time."""
  with pytest.raises(ValueError, match='greater than or equal to 0'):
    GetSessionConfig(num_recent_events=-1)


class SessionServiceType(enum.Enum):
  IN_MEMORY = 'IN_MEMORY'
  DATABASE = 'DATABASE'
  SQLITE = 'SQLITE'


def get_session_service(
    service_type: SessionServiceType = SessionServiceType.IN_MEMORY,
    tmp_path=None,
):
  """Creates a session service for testing."""
  # the swap: every persistent type is the mindstore service on the test's store
  if service_type in (SessionServiceType.DATABASE, SessionServiceType.SQLITE):
    return _conformance.mindstore_service()
  return InMemorySessionService()


def test_recorded_divergences_name_a_contract_test():
  """A divergence keyed on anything else silently excuses no backend."""
  for backend in _conformance.BACKENDS:
    for test_name in backend.divergences:
      test_function = globals().get(test_name)
      assert test_function is not None, (
          f'{backend.name} records a divergence for {test_name}, which is not'
          ' a test in this module'
      )
      parameters = inspect.signature(test_function).parameters
      assert 'session_service' in parameters, (
          f'{backend.name} records a divergence for {test_name}, which does'
          ' not take the shared contract fixture'
      )


@pytest.mark.asyncio
async def test_get_empty_session(session_service):
  assert not await session_service.get_session(
      app_name='my_app', user_id='test_user', session_id='123'
  )


@pytest.mark.asyncio
async def test_create_get_session(session_service):
  app_name = 'my_app'
  user_id = 'test_user'
  state = {'key': 'value'}

  session = await session_service.create_session(
      app_name=app_name, user_id=user_id, state=state
  )
  assert session.app_name == app_name
  assert session.user_id == user_id
  assert session.id
  assert session.state == state
  assert session.last_update_time <= time.time()

  got_session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id
  )
  assert got_session == session
  assert got_session.last_update_time <= time.time()

  session_id = session.id
  await session_service.delete_session(
      app_name=app_name, user_id=user_id, session_id=session_id
  )

  assert (
      await session_service.get_session(
          app_name=app_name, user_id=user_id, session_id=session.id
      )
      is None
  )


@pytest.mark.asyncio
async def test_create_and_list_sessions(session_service):
  app_name = 'my_app'
  user_id = 'test_user'

  session_ids = ['session' + str(i) for i in range(5)]
  for session_id in session_ids:
    await session_service.create_session(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        state={'key': 'value' + session_id},
    )

  list_sessions_response = await session_service.list_sessions(
      app_name=app_name, user_id=user_id
  )
  sessions = list_sessions_response.sessions
  assert len(sessions) == len(session_ids)
  assert {s.id for s in sessions} == set(session_ids)
  for session in sessions:
    assert session.state == {'key': 'value' + session.id}


@pytest.mark.asyncio
async def test_list_sessions_ordered_by_last_update_time(session_service):
  app_name = 'my_app'
  user_id = 'test_user'

  for session_id in ('a', 'b', 'c'):
    await session_service.create_session(
        app_name=app_name, user_id=user_id, session_id=session_id
    )

  # Make the oldest session the most recently active one.
  session_a = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id='a'
  )
  await asyncio.sleep(0.01)
  await session_service.append_event(
      session=session_a,
      event=Event(invocation_id='invocation', author='user'),
  )

  list_sessions_response = await session_service.list_sessions(
      app_name=app_name, user_id=user_id
  )
  assert [s.id for s in list_sessions_response.sessions] == ['b', 'c', 'a']


@pytest.mark.asyncio
async def test_list_sessions_all_users(session_service):
  app_name = 'my_app'
  user_id_1 = 'user1'
  user_id_2 = 'user2'

  await session_service.create_session(
      app_name=app_name,
      user_id=user_id_1,
      session_id='session1a',
      state={'key': 'value1a'},
  )
  await session_service.create_session(
      app_name=app_name,
      user_id=user_id_1,
      session_id='session1b',
      state={'key': 'value1b'},
  )
  await session_service.create_session(
      app_name=app_name,
      user_id=user_id_2,
      session_id='session2a',
      state={'key': 'value2a'},
  )

  # List sessions for user1 - should contain merged state
  list_sessions_response_1 = await session_service.list_sessions(
      app_name=app_name, user_id=user_id_1
  )
  sessions_1 = list_sessions_response_1.sessions
  assert len(sessions_1) == 2
  sessions_1_map = {s.id: s for s in sessions_1}
  assert sessions_1_map['session1a'].state == {'key': 'value1a'}
  assert sessions_1_map['session1b'].state == {'key': 'value1b'}

  # List sessions for user2 - should contain merged state
  list_sessions_response_2 = await session_service.list_sessions(
      app_name=app_name, user_id=user_id_2
  )
  sessions_2 = list_sessions_response_2.sessions
  assert len(sessions_2) == 1
  assert sessions_2[0].id == 'session2a'
  assert sessions_2[0].state == {'key': 'value2a'}

  # List sessions for all users - should contain merged state
  list_sessions_response_all = await session_service.list_sessions(
      app_name=app_name, user_id=None
  )
  sessions_all = list_sessions_response_all.sessions
  assert len(sessions_all) == 3
  sessions_all_map = {s.id: s for s in sessions_all}
  assert sessions_all_map['session1a'].state == {'key': 'value1a'}
  assert sessions_all_map['session1b'].state == {'key': 'value1b'}
  assert sessions_all_map['session2a'].state == {'key': 'value2a'}


@pytest.mark.asyncio
async def test_app_state_is_shared_by_all_users_of_app(session_service):
  app_name = 'my_app'
  # User 1 creates a session, establishing app:k1
  session1 = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'app:k1': 'v1'}
  )
  # User 1 appends an event to session1, establishing app:k2
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'app:k2': 'v2'}),
  )
  await session_service.append_event(session=session1, event=event)

  # User 2 creates a new session session2, it should see app:k1 and app:k2
  session2 = await session_service.create_session(
      app_name=app_name, user_id='u2', session_id='s2'
  )
  assert session2.state == {'app:k1': 'v1', 'app:k2': 'v2'}

  # If we get session session1 again, it should also see both
  session1_got = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert session1_got.state.get('app:k1') == 'v1'
  assert session1_got.state.get('app:k2') == 'v2'


@pytest.mark.asyncio
async def test_user_state_is_shared_only_by_user_sessions(session_service):
  app_name = 'my_app'
  # User 1 creates a session, establishing user:k1 for user 1
  session1 = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'user:k1': 'v1'}
  )
  # User 1 appends an event to session1, establishing user:k2 for user 1
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'user:k2': 'v2'}),
  )
  await session_service.append_event(session=session1, event=event)

  # Another session for User 1 should see user:k1 and user:k2
  session1b = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1b'
  )
  assert session1b.state == {'user:k1': 'v1', 'user:k2': 'v2'}

  # A session for User 2 should NOT see user:k1 or user:k2
  session2 = await session_service.create_session(
      app_name=app_name, user_id='u2', session_id='s2'
  )
  assert session2.state == {}


@pytest.mark.asyncio
async def test_session_state_is_not_shared(session_service):
  app_name = 'my_app'
  # User 1 creates a session session1, establishing sk1 only for session1
  session1 = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'sk1': 'v1'}
  )
  # User 1 appends an event to session1, establishing sk2 only for session1
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'sk2': 'v2'}),
  )
  await session_service.append_event(session=session1, event=event)

  # Getting session1 should show sk1 and sk2
  session1_got = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert session1_got.state.get('sk1') == 'v1'
  assert session1_got.state.get('sk2') == 'v2'

  # Creating another session session1b for User 1 should NOT see sk1 or sk2
  session1b = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1b'
  )
  assert session1b.state == {}


@pytest.mark.asyncio
async def test_dict_valued_state_delta_replaces_stored_value(session_service):
  """A dict-valued delta replaces the stored value, it is not deep-merged."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name,
      user_id='u1',
      session_id='s1',
      state={'profile': {'name': 'ada', 'role': 'admin'}},
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'profile': {'name': 'bob'}}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert reloaded.state.get('profile') == {'name': 'bob'}
  assert session.state.get('profile') == {'name': 'bob'}


@pytest.mark.asyncio
async def test_none_valued_state_delta_is_stored_not_dropped(session_service):
  """A None-valued delta stores null, it does not delete the key."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'flag': True}
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'flag': None}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert 'flag' in reloaded.state
  assert reloaded.state.get('flag') is None
  assert 'flag' in session.state
  assert session.state.get('flag') is None


@pytest.mark.asyncio
async def test_boolean_state_survives_unrelated_state_delta(session_service):
  """An unrelated state_delta must not corrupt a stored boolean's type."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'flag': False}
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'new_flag': True}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert reloaded.state.get('new_flag') is True
  assert reloaded.state.get('flag') is False
  assert session.state.get('new_flag') is True
  assert session.state.get('flag') is False


@pytest.mark.asyncio
async def test_dict_valued_state_delta_replaces_stored_value(session_service):
  """A dict-valued delta replaces the stored value, it is not deep-merged."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name,
      user_id='u1',
      session_id='s1',
      state={'profile': {'name': 'ada', 'role': 'admin'}},
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'profile': {'name': 'bob'}}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert reloaded.state.get('profile') == {'name': 'bob'}
  assert session.state.get('profile') == {'name': 'bob'}


@pytest.mark.asyncio
async def test_none_valued_state_delta_is_stored_not_dropped(session_service):
  """A None-valued delta stores null, it does not delete the key."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'flag': True}
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'flag': None}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert 'flag' in reloaded.state
  assert reloaded.state.get('flag') is None
  assert 'flag' in session.state
  assert session.state.get('flag') is None


@pytest.mark.asyncio
async def test_boolean_state_survives_unrelated_state_delta(session_service):
  """An unrelated state_delta must not corrupt a stored boolean's type."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'flag': False}
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'new_flag': True}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert reloaded.state.get('new_flag') is True
  assert reloaded.state.get('flag') is False
  assert session.state.get('new_flag') is True
  assert session.state.get('flag') is False


@pytest.mark.asyncio
async def test_app_state_dict_valued_delta_replaces_stored_value(
    session_service,
):
  """A dict-valued delta to app: state replaces it, it is not deep-merged."""
  app_name = 'my_app'
  session1 = await session_service.create_session(
      app_name=app_name,
      user_id='u1',
      session_id='s1',
      state={'app:cfg': {'name': 'ada', 'role': 'admin'}},
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'app:cfg': {'name': 'bob'}}),
  )
  await session_service.append_event(session=session1, event=event)

  # A different user's session should see the replaced, not merged, value.
  session2 = await session_service.create_session(
      app_name=app_name, user_id='u2', session_id='s2'
  )
  assert session2.state.get('app:cfg') == {'name': 'bob'}
  assert session1.state.get('app:cfg') == {'name': 'bob'}


@pytest.mark.asyncio
async def test_user_state_none_valued_delta_is_stored_not_dropped(
    session_service,
):
  """A None-valued delta to user: state stores null, it does not delete it."""
  app_name = 'my_app'
  session1 = await session_service.create_session(
      app_name=app_name,
      user_id='u1',
      session_id='s1',
      state={'user:pref': 'dark_mode'},
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'user:pref': None}),
  )
  await session_service.append_event(session=session1, event=event)

  # Another session for the same user should see the null, not a dropped key.
  session1b = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1b'
  )
  assert 'user:pref' in session1b.state
  assert session1b.state.get('user:pref') is None
  assert 'user:pref' in session1.state
  assert session1.state.get('user:pref') is None


@pytest.mark.asyncio
async def test_dict_valued_state_delta_replaces_stored_value(session_service):
  """A dict-valued delta replaces the stored value, it is not deep-merged."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name,
      user_id='u1',
      session_id='s1',
      state={'profile': {'name': 'ada', 'role': 'admin'}},
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'profile': {'name': 'bob'}}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert reloaded.state.get('profile') == {'name': 'bob'}
  assert session.state.get('profile') == {'name': 'bob'}


@pytest.mark.asyncio
async def test_none_valued_state_delta_is_stored_not_dropped(session_service):
  """A None-valued delta stores null, it does not delete the key."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'flag': True}
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'flag': None}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert 'flag' in reloaded.state
  assert reloaded.state.get('flag') is None
  assert 'flag' in session.state
  assert session.state.get('flag') is None


@pytest.mark.asyncio
async def test_boolean_state_survives_unrelated_state_delta(session_service):
  """An unrelated state_delta must not corrupt a stored boolean's type."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'flag': False}
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'new_flag': True}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert reloaded.state.get('new_flag') is True
  assert reloaded.state.get('flag') is False
  assert session.state.get('new_flag') is True
  assert session.state.get('flag') is False


@pytest.mark.asyncio
async def test_app_state_dict_valued_delta_replaces_stored_value(
    session_service,
):
  """A dict-valued delta to app: state replaces it, it is not deep-merged."""
  app_name = 'my_app'
  session1 = await session_service.create_session(
      app_name=app_name,
      user_id='u1',
      session_id='s1',
      state={'app:cfg': {'name': 'ada', 'role': 'admin'}},
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'app:cfg': {'name': 'bob'}}),
  )
  await session_service.append_event(session=session1, event=event)

  # A different user's session should see the replaced, not merged, value.
  session2 = await session_service.create_session(
      app_name=app_name, user_id='u2', session_id='s2'
  )
  assert session2.state.get('app:cfg') == {'name': 'bob'}
  assert session1.state.get('app:cfg') == {'name': 'bob'}


@pytest.mark.asyncio
async def test_user_state_none_valued_delta_is_stored_not_dropped(
    session_service,
):
  """A None-valued delta to user: state stores null, it does not delete it."""
  app_name = 'my_app'
  session1 = await session_service.create_session(
      app_name=app_name,
      user_id='u1',
      session_id='s1',
      state={'user:pref': 'dark_mode'},
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'user:pref': None}),
  )
  await session_service.append_event(session=session1, event=event)

  # Another session for the same user should see the null, not a dropped key.
  session1b = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1b'
  )
  assert 'user:pref' in session1b.state
  assert session1b.state.get('user:pref') is None
  assert 'user:pref' in session1.state
  assert session1.state.get('user:pref') is None


@pytest.mark.asyncio
async def test_dict_valued_state_delta_replaces_stored_value(session_service):
  """A dict-valued delta replaces the stored value, it is not deep-merged."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name,
      user_id='u1',
      session_id='s1',
      state={'profile': {'name': 'ada', 'role': 'admin'}},
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'profile': {'name': 'bob'}}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert reloaded.state.get('profile') == {'name': 'bob'}
  assert session.state.get('profile') == {'name': 'bob'}


@pytest.mark.asyncio
async def test_none_valued_state_delta_is_stored_not_dropped(session_service):
  """A None-valued delta stores null, it does not delete the key."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'flag': True}
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'flag': None}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert 'flag' in reloaded.state
  assert reloaded.state.get('flag') is None
  assert 'flag' in session.state
  assert session.state.get('flag') is None


@pytest.mark.asyncio
async def test_boolean_state_survives_unrelated_state_delta(session_service):
  """An unrelated state_delta must not corrupt a stored boolean's type."""
  app_name = 'my_app'
  session = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1', state={'flag': False}
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'new_flag': True}),
  )
  await session_service.append_event(session=session, event=event)

  reloaded = await session_service.get_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  assert reloaded.state.get('new_flag') is True
  assert reloaded.state.get('flag') is False
  assert session.state.get('new_flag') is True
  assert session.state.get('flag') is False


@pytest.mark.asyncio
async def test_app_state_dict_valued_delta_replaces_stored_value(
    session_service,
):
  """A dict-valued delta to app: state replaces it, it is not deep-merged."""
  app_name = 'my_app'
  session1 = await session_service.create_session(
      app_name=app_name,
      user_id='u1',
      session_id='s1',
      state={'app:cfg': {'name': 'ada', 'role': 'admin'}},
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'app:cfg': {'name': 'bob'}}),
  )
  await session_service.append_event(session=session1, event=event)

  # A different user's session should see the replaced, not merged, value.
  session2 = await session_service.create_session(
      app_name=app_name, user_id='u2', session_id='s2'
  )
  assert session2.state.get('app:cfg') == {'name': 'bob'}
  assert session1.state.get('app:cfg') == {'name': 'bob'}


@pytest.mark.asyncio
async def test_user_state_none_valued_delta_is_stored_not_dropped(
    session_service,
):
  """A None-valued delta to user: state stores null, it does not delete it."""
  app_name = 'my_app'
  session1 = await session_service.create_session(
      app_name=app_name,
      user_id='u1',
      session_id='s1',
      state={'user:pref': 'dark_mode'},
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'user:pref': None}),
  )
  await session_service.append_event(session=session1, event=event)

  # Another session for the same user should see the null, not a dropped key.
  session1b = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1b'
  )
  assert 'user:pref' in session1b.state
  assert session1b.state.get('user:pref') is None
  assert 'user:pref' in session1.state
  assert session1.state.get('user:pref') is None


@pytest.mark.asyncio
async def test_temp_state_is_not_persisted_in_state_or_events(session_service):
  app_name = 'my_app'
  user_id = 'u1'
  session = await session_service.create_session(
      app_name=app_name, user_id=user_id, session_id='s1'
  )
  event = Event(
      invocation_id='inv1',
      author='user',
      actions=EventActions(state_delta={'temp:k1': 'v1', 'sk': 'v2'}),
  )
  await session_service.append_event(session=session, event=event)

  # Temp state IS available in the in-memory session (same invocation)
  assert session.state.get('temp:k1') == 'v1'
  assert session.state.get('sk') == 'v2'

  # Check event as stored in session does not contain temp keys in state_delta
  assert 'temp:k1' not in event.actions.state_delta
  assert event.actions.state_delta.get('sk') == 'v2'


@pytest.mark.asyncio
async def test_temp_state_visible_across_sequential_events(session_service):
  """Temp state set by one event should be readable before the next event.

  This simulates a SequentialAgent where agent-1 writes output_key='temp:out'
  and agent-2 needs to read it from session.state within the same invocation.
  """
  app_name = 'my_app'
  user_id = 'u1'
  session = await session_service.create_session(
      app_name=app_name, user_id=user_id, session_id='s_seq'
  )

  # Agent-1 writes temp state
  event1 = Event(
      invocation_id='inv1',
      author='agent1',
      actions=EventActions(state_delta={'temp:output': 'result_from_a1'}),
  )
  await session_service.append_event(session=session, event=event1)

  # Agent-2 should be able to read temp state from the same session object
  assert session.state.get('temp:output') == 'result_from_a1'

  # But the event delta should NOT contain the temp key (not persisted)
  assert 'temp:output' not in event1.actions.state_delta


@pytest.mark.asyncio
async def test_get_session_respects_user_id(session_service):
  app_name = 'my_app'
  # u1 creates session 's1' and adds an event
  session1 = await session_service.create_session(
      app_name=app_name, user_id='u1', session_id='s1'
  )
  event = Event(invocation_id='inv1', author='user')
  await session_service.append_event(session1, event)
  # u2 creates a session with the same session_id 's1'
  await session_service.create_session(
      app_name=app_name, user_id='u2', session_id='s1'
  )
  # Check that getting s1 for u2 returns u2's session (with no events)
  # not u1's session.
  session2_got = await session_service.get_session(
      app_name=app_name, user_id='u2', session_id='s1'
  )
  assert session2_got.user_id == 'u2'
  assert len(session2_got.events) == 0


@pytest.mark.asyncio
async def test_create_session_with_existing_id_raises_error(session_service):
  app_name = 'my_app'
  user_id = 'test_user'
  session_id = 'existing_session'

  # Create the first session
  await session_service.create_session(
      app_name=app_name,
      user_id=user_id,
      session_id=session_id,
  )

  # Attempt to create a session with the same ID
  with pytest.raises(AlreadyExistsError):
    await session_service.create_session(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
    )


@pytest.mark.asyncio
async def test_append_event_bytes(session_service):
  app_name = 'my_app'
  user_id = 'user'

  session = await session_service.create_session(
      app_name=app_name, user_id=user_id
  )

  test_content = types.Content(
      role='user',
      parts=[
          types.Part.from_bytes(data=b'test_image_data', mime_type='image/png'),
      ],
  )
  test_grounding_metadata = types.GroundingMetadata(
      search_entry_point=types.SearchEntryPoint(sdk_blob=b'test_sdk_blob')
  )
  event = Event(
      invocation_id='invocation',
      author='user',
      content=test_content,
      grounding_metadata=test_grounding_metadata,
  )
  await session_service.append_event(session=session, event=event)

  assert session.events[0].content == test_content

  session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id
  )
  events = session.events
  assert len(events) == 1
  assert events[0].content == test_content
  assert events[0].grounding_metadata == test_grounding_metadata


@pytest.mark.asyncio
async def test_append_event_complete(session_service):
  app_name = 'my_app'
  user_id = 'user'

  session = await session_service.create_session(
      app_name=app_name, user_id=user_id
  )
  event = Event(
      invocation_id='invocation',
      author='user',
      content=types.Content(role='user', parts=[types.Part(text='test_text')]),
      turn_complete=True,
      partial=False,
      actions=EventActions(
          artifact_delta={
              'file': 0,
          },
          transfer_to_agent='agent',
          escalate=True,
      ),
      long_running_tool_ids={'tool1'},
      error_code='error_code',
      error_message='error_message',
      interrupted=True,
      grounding_metadata=types.GroundingMetadata(
          web_search_queries=['query1'],
      ),
      usage_metadata=types.GenerateContentResponseUsageMetadata(
          prompt_token_count=1, candidates_token_count=1, total_token_count=2
      ),
      citation_metadata=types.CitationMetadata(),
      custom_metadata={'custom_key': 'custom_value'},
      timestamp=1700000000.123,
      input_transcription=types.Transcription(
          text='input transcription',
          finished=True,
      ),
      output_transcription=types.Transcription(
          text='output transcription',
          finished=True,
      ),
  )
  await session_service.append_event(session=session, event=event)

  assert (
      await session_service.get_session(
          app_name=app_name, user_id=user_id, session_id=session.id
      )
      == session
  )


@pytest.mark.asyncio
async def test_append_event_with_requested_tool_confirmations(session_service):
  """Tests that EventActions.requested_tool_confirmations is preserved in session service."""
  app_name = 'my_app'
  user_id = 'user'

  session = await session_service.create_session(
      app_name=app_name, user_id=user_id
  )
  event = Event(
      invocation_id='invocation',
      author='user',
      actions=EventActions(
          requested_tool_confirmations={
              'tool_call_1': ToolConfirmation(
                  hint='dynamic hint',
                  confirmed=False,
                  payload={
                      'collection_name': 'photos',
                      'resource_id': 'album_1',
                  },
              )
          }
      ),
  )
  await session_service.append_event(session=session, event=event)

  refreshed_session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id
  )
  assert refreshed_session is not None
  assert len(refreshed_session.events) == 1
  retrieved_event = refreshed_session.events[0]
  assert retrieved_event.actions is not None
  assert 'tool_call_1' in retrieved_event.actions.requested_tool_confirmations
  tc = retrieved_event.actions.requested_tool_confirmations['tool_call_1']
  assert tc.hint == 'dynamic hint'
  assert tc.payload == {
      'collection_name': 'photos',
      'resource_id': 'album_1',
  }
  assert not tc.confirmed


@pytest.mark.asyncio
@pytest.mark.parametrize(
    'service_type',
    [SessionServiceType.DATABASE, SessionServiceType.SQLITE],
)
async def test_append_event_with_non_serializable_state_delta(
    service_type, tmp_path
):
  """A value the JSON encoder rejects must not destroy the whole event."""
  session_service = get_session_service(service_type, tmp_path)
  app_name = 'my_app'
  user_id = 'user'

  session = await session_service.create_session(
      app_name=app_name, user_id=user_id
  )
  event = Event(
      invocation_id='invocation',
      author='user',
      actions=EventActions(state_delta={'callback': lambda: 1, 'ok': 2}),
  )
  await session_service.append_event(session=session, event=event)

  refreshed_session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id
  )
  assert refreshed_session is not None
  assert len(refreshed_session.events) == 1
  assert refreshed_session.state['ok'] == 2
  assert isinstance(refreshed_session.state['callback'], str)

  if isinstance(session_service, DatabaseSessionService):
    await session_service.close()


@pytest.mark.asyncio
async def test_session_last_update_time_updates_on_event(session_service):
  app_name = 'my_app'
  user_id = 'user'

  session = await session_service.create_session(
      app_name=app_name, user_id=user_id
  )
  original_update_time = session.last_update_time

  event_timestamp = original_update_time + 10
  event = Event(
      invocation_id='invocation',
      author='user',
      timestamp=event_timestamp,
  )
  await session_service.append_event(session=session, event=event)

  assert session.last_update_time == pytest.approx(event_timestamp, abs=1e-6)

  refreshed_session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id
  )
  assert refreshed_session is not None
  assert refreshed_session.last_update_time == pytest.approx(
      event_timestamp, abs=1e-6
  )
  assert refreshed_session.last_update_time > original_update_time


@pytest.mark.asyncio
@pytest.mark.parametrize(
    'service_type', [SessionServiceType.DATABASE, SessionServiceType.SQLITE]
)
async def test_append_event_to_deleted_session_raises_session_not_found(
    service_type, tmp_path
):
  session_service = get_session_service(service_type, tmp_path)
  try:
    app_name = 'my_app'
    user_id = 'user'
    session = await session_service.create_session(
        app_name=app_name, user_id=user_id
    )
    await session_service.delete_session(
        app_name=app_name, user_id=user_id, session_id=session.id
    )

    event = Event(invocation_id='inv1', author='user')
    with pytest.raises(SessionNotFoundError):
      await session_service.append_event(session, event)
  finally:
    if isinstance(session_service, DatabaseSessionService):
      await session_service.close()


@pytest.mark.asyncio
async def test_append_event_to_stale_session():
  session_service = get_session_service(
      service_type=SessionServiceType.DATABASE
  )

  async with session_service:
    app_name = 'my_app'
    user_id = 'user'
    current_time = datetime.now().astimezone(timezone.utc).timestamp()

    original_session = await session_service.create_session(
        app_name=app_name, user_id=user_id
    )
    event1 = Event(
        invocation_id='inv1',
        author='user',
        timestamp=current_time + 1,
        actions=EventActions(state_delta={'sk1': 'v1'}),
    )
    await session_service.append_event(original_session, event1)

    updated_session = await session_service.get_session(
        app_name=app_name, user_id=user_id, session_id=original_session.id
    )
    event2 = Event(
        invocation_id='inv2',
        author='user',
        timestamp=current_time + 2,
        actions=EventActions(state_delta={'sk2': 'v2'}),
    )
    await session_service.append_event(updated_session, event2)

    # original_session is now stale
    assert original_session.last_update_time < updated_session.last_update_time
    assert len(original_session.events) == 1
    assert 'sk2' not in original_session.state

    # Appending another event to stale original_session should be rejected.
    event3 = Event(
        invocation_id='inv3',
        author='user',
        timestamp=current_time + 3,
        actions=EventActions(state_delta={'sk3': 'v3'}),
    )
    with pytest.raises(StaleSessionError, match='modified in storage'):
      await session_service.append_event(original_session, event3)

    # If we fetch session from DB, it should only contain the committed events.
    session_final = await session_service.get_session(
        app_name=app_name, user_id=user_id, session_id=original_session.id
    )
    assert len(session_final.events) == 2
    assert session_final.state.get('sk1') == 'v1'
    assert session_final.state.get('sk2') == 'v2'
    assert session_final.state.get('sk3') is None
    assert [e.invocation_id for e in session_final.events] == [
        'inv1',
        'inv2',
    ]


@pytest.mark.asyncio
async def test_sqlite_append_event_uses_typed_stale_session_error(tmp_path):
  """The legacy SQLite backend exposes the shared stale-writer contract."""
  service = get_session_service(SessionServiceType.SQLITE, tmp_path)
  session = await service.create_session(app_name='app', user_id='user')
  stale_session = session.model_copy(deep=True)

  await service.append_event(
      session,
      Event(
          invocation_id='winner',
          author='user',
          timestamp=session.last_update_time + 1,
      ),
  )

  with pytest.raises(StaleSessionError) as error:
    await service.append_event(
        stale_session,
        Event(
            invocation_id='stale',
            author='user',
            timestamp=session.last_update_time + 1,
        ),
    )

  assert isinstance(error.value, ValueError)


@pytest.mark.asyncio
async def test_append_event_concurrent_stale_sessions_reject_stale_writer():
  session_service = get_session_service(
      service_type=SessionServiceType.DATABASE
  )

  async with session_service:
    app_name = 'my_app'
    user_id = 'user'
    session = await session_service.create_session(
        app_name=app_name, user_id=user_id
    )

    iteration_count = 8
    for i in range(iteration_count):
      latest_session = await session_service.get_session(
          app_name=app_name, user_id=user_id, session_id=session.id
      )
      stale_session_1 = latest_session.model_copy(deep=True)
      stale_session_2 = latest_session.model_copy(deep=True)
      base_timestamp = latest_session.last_update_time + 10.0
      event_1 = Event(
          invocation_id=f'inv{i}-1',
          author='user',
          timestamp=base_timestamp + 1.0,
          actions=EventActions(state_delta={f'sk{i}-1': f'v{i}-1'}),
      )
      event_2 = Event(
          invocation_id=f'inv{i}-2',
          author='user',
          timestamp=base_timestamp + 2.0,
          actions=EventActions(state_delta={f'sk{i}-2': f'v{i}-2'}),
      )

      results = await asyncio.gather(
          session_service.append_event(stale_session_1, event_1),
          session_service.append_event(stale_session_2, event_2),
          return_exceptions=True,
      )
      errors = [result for result in results if isinstance(result, Exception)]
      successes = [
          result for result in results if not isinstance(result, Exception)
      ]
      assert len(successes) == 1
      assert len(errors) == 1
      assert isinstance(errors[0], StaleSessionError)
      assert 'modified in storage' in str(errors[0])

    session_final = await session_service.get_session(
        app_name=app_name, user_id=user_id, session_id=session.id
    )

    for i in range(iteration_count):
      event_values = {
          session_final.state.get(f'sk{i}-1'),
          session_final.state.get(f'sk{i}-2'),
      }
      assert event_values & {f'v{i}-1', f'v{i}-2'}
      assert None in event_values
    assert len(session_final.events) == iteration_count


@pytest.mark.asyncio
async def test_get_session_with_config(session_service):
  app_name = 'my_app'
  user_id = 'user'

  num_test_events = 5
  base_timestamp = int(time.time())
  session = await session_service.create_session(
      app_name=app_name, user_id=user_id
  )
  for i in range(1, num_test_events + 1):
    event = Event(author='user', timestamp=base_timestamp + i)
    await session_service.append_event(session, event)

  # No config, expect all events to be returned.
  session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id
  )
  events = session.events
  assert len(events) == num_test_events

  # Explicitly requesting zero recent events should return no event history.
  config = GetSessionConfig(num_recent_events=0)
  session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id, config=config
  )
  assert not session.events

  # Only expect the most recent 3 events.
  num_recent_events = 3
  config = GetSessionConfig(num_recent_events=num_recent_events)
  session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id, config=config
  )
  events = session.events
  assert len(events) == num_recent_events
  assert (
      events[0].timestamp
      == base_timestamp + num_test_events - num_recent_events + 1
  )

  # Only expect events after the fourth timestamp (inclusive), i.e., 2 events.
  after_event_index = 4
  after_timestamp = base_timestamp + after_event_index
  config = GetSessionConfig(after_timestamp=after_timestamp)
  session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id, config=config
  )
  events = session.events
  assert len(events) == num_test_events - after_event_index + 1
  assert events[0].timestamp == after_timestamp

  # Expect no events if none are > after_timestamp.
  way_after_timestamp = base_timestamp + num_test_events * 10
  config = GetSessionConfig(after_timestamp=way_after_timestamp)
  session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id, config=config
  )
  assert not session.events

  # Both filters applied, i.e., of 3 most recent events, only 2 are after
  # timestamp 4.0, so expect 2 events.
  config = GetSessionConfig(
      after_timestamp=after_timestamp, num_recent_events=num_recent_events
  )
  session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id, config=config
  )
  events = session.events
  assert len(events) == num_test_events - after_event_index + 1


@pytest.mark.asyncio
async def test_partial_events_are_not_persisted(session_service):
  app_name = 'my_app'
  user_id = 'user'
  session = await session_service.create_session(
      app_name=app_name, user_id=user_id
  )
  event = Event(author='user', partial=True)
  await session_service.append_event(session, event)

  # Check in-memory session
  assert len(session.events) == 0
  # Check persisted session
  session_got = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id
  )
  assert len(session_got.events) == 0


@pytest.mark.asyncio
async def test_get_user_state_returns_empty_dict_when_no_state_exists(
    session_service,
):
  """Verifies get_user_state returns empty dict when no state exists."""
  state = await session_service.get_user_state(app_name='my_app', user_id='u1')
  assert not state


@pytest.mark.asyncio
async def test_get_user_state_returns_state_written_via_append_event(
    session_service,
):
  """Verifies get_user_state returns state written via append_event."""
  session = await session_service.create_session(
      app_name='my_app', user_id='u1'
  )
  await session_service.append_event(
      session,
      Event(
          author='system',
          actions=EventActions(
              state_delta={'user:profile': {'name': 'Alice'}, 'session_key': 1}
          ),
      ),
  )

  state = await session_service.get_user_state(app_name='my_app', user_id='u1')

  assert state == {'profile': {'name': 'Alice'}}
  assert 'session_key' not in state


@pytest.mark.asyncio
async def test_get_user_state_is_not_visible_across_users(session_service):
  """Verifies user state is isolated between users."""
  session = await session_service.create_session(
      app_name='my_app', user_id='u1'
  )
  await session_service.append_event(
      session,
      Event(
          author='system',
          actions=EventActions(state_delta={'user:secret': 'only-for-u1'}),
      ),
  )

  other_state = await session_service.get_user_state(
      app_name='my_app', user_id='u2'
  )
  assert not other_state


@pytest.mark.asyncio
async def test_get_user_state_is_not_visible_across_apps(session_service):
  """Verifies user state is isolated between apps."""
  session = await session_service.create_session(
      app_name='my_app', user_id='u1'
  )
  await session_service.append_event(
      session,
      Event(
          author='system',
          actions=EventActions(state_delta={'user:data': 'only-app-a'}),
      ),
  )

  other_state = await session_service.get_user_state(
      app_name='other_app', user_id='u1'
  )
  assert not other_state


@pytest.mark.asyncio
async def test_get_user_state_available_before_session_is_created(
    session_service,
):
  """Verifies user state can be retrieved before a session is created."""
  first_session = await session_service.create_session(
      app_name='my_app', user_id='u1'
  )
  await session_service.append_event(
      first_session,
      Event(
          author='system',
          actions=EventActions(state_delta={'user:ctx': {'v': 1}}),
      ),
  )

  state = await session_service.get_user_state(app_name='my_app', user_id='u1')
  assert state == {'ctx': {'v': 1}}


@pytest.mark.asyncio
async def test_get_user_state_reflects_latest_write(session_service):
  """Verifies get_user_state returns the latest state."""
  session = await session_service.create_session(
      app_name='my_app', user_id='u1'
  )
  await session_service.append_event(
      session,
      Event(
          author='system',
          actions=EventActions(state_delta={'user:counter': 1}),
      ),
  )
  await session_service.append_event(
      session,
      Event(
          author='system',
          actions=EventActions(state_delta={'user:counter': 2}),
      ),
  )

  state = await session_service.get_user_state(app_name='my_app', user_id='u1')
  assert state['counter'] == 2


@pytest.fixture
def local_timezone_with_dst():
  """Runs the test in a local timezone that repeats an hour every autumn.

  ``time.tzset`` is POSIX-only, so on other platforms the test runs in the
  host zone instead. Restoring ``TZ`` without a second ``tzset`` would leave
  the C library pinned for the rest of the session, so both are undone.
  """
  if not hasattr(time, 'tzset'):
    yield
    return
  original_tz = os.environ.get('TZ')
  os.environ['TZ'] = 'America/New_York'
  time.tzset()
  try:
    yield
  finally:
    if original_tz is None:
      del os.environ['TZ']
    else:
      os.environ['TZ'] = original_tz
    time.tzset()


@pytest.mark.asyncio
async def test_get_session_keeps_exact_epoch_across_a_repeated_local_hour(
    session_service, local_timezone_with_dst
):
  """Events written during a repeated local hour read back at the same instant.

  2024-11-03 06:00 and 06:30 UTC are 01:00 and 01:30 in US Eastern for the
  second time that morning; the same local wall-clock times already happened
  an hour earlier. A round trip that reconstructs the epoch from local wall
  clock alone cannot tell the two passes apart, so those events come back an
  hour early and sort into the wrong place in the conversation.
  """
  app_name = 'my_app'
  user_id = 'user'
  # Both instants fall in the repeated hour, so their local times are
  # ambiguous.
  repeated_hour_epochs = [1730613600.0, 1730615400.0]

  session = await session_service.create_session(
      app_name=app_name, user_id=user_id
  )
  for epoch in repeated_hour_epochs:
    await session_service.append_event(
        session, Event(author='user', timestamp=epoch)
    )

  retrieved_session = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id=session.id
  )

  assert [
      event.timestamp for event in retrieved_session.events
  ] == repeated_hour_epochs


@pytest.mark.asyncio
async def test_append_event_is_idempotent_for_same_event_id(session_service):
  """Re-delivering an event must not duplicate entries or double-apply state.

  A broadcast can re-deliver the same event either as the same object or as
  an equal copy, so both must be deduplicated.
  """
  app_name = 'test_app'
  user_id = 'user_dup'
  session = await session_service.create_session(
      app_name=app_name, user_id=user_id, session_id='session_dup'
  )

  event = Event(
      invocation_id='inv_dup',
      author='user',
      actions=EventActions(state_delta={'session:counter': 1}),
  )

  # Re-deliver as the same object and again as an equal copy (a broadcast
  # to several concurrent session references can produce either).
  await session_service.append_event(session=session, event=event)
  await session_service.append_event(session=session, event=event)
  await session_service.append_event(
      session=session, event=event.model_copy(deep=True)
  )

  # The storage session must contain the event exactly once.
  retrieved = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id='session_dup'
  )
  matching = [e for e in retrieved.events if e.id == event.id]
  assert (
      len(matching) == 1
  ), f'Expected 1 occurrence of event {event.id!r}, got {len(matching)}'

  # State must not be double-applied.
  assert (
      retrieved.state.get('session:counter') == 1
  ), 'State was applied more than once — duplicate event caused double-apply'


@pytest.mark.asyncio
async def test_append_different_events_not_deduplicated(session_service):
  """Distinct events must both be stored, even when they share an event id.

  Deduplication is keyed on object identity, not event id: a caller can
  legitimately reuse an id across genuinely different events (e.g. a test
  that patches uuid4 to a constant), and keying on id alone would silently
  drop the later events.
  """
  app_name = 'test_app'
  user_id = 'user_multi'
  session = await session_service.create_session(
      app_name=app_name, user_id=user_id, session_id='session_multi'
  )

  # Two genuinely different events that share an id, as happens when a test
  # patches uuid generation to a fixed value.
  shared_id = 'shared-event-id'
  e1 = Event(id=shared_id, invocation_id='inv_a', author='user')
  e2 = Event(id=shared_id, invocation_id='inv_b', author='agent')

  await session_service.append_event(session=session, event=e1)
  await session_service.append_event(session=session, event=e2)

  retrieved = await session_service.get_session(
      app_name=app_name, user_id=user_id, session_id='session_multi'
  )
  assert (
      len(retrieved.events) == 2
  ), f'Expected 2 distinct events, got {len(retrieved.events)}'
  assert [e.author for e in retrieved.events] == ['user', 'agent']

