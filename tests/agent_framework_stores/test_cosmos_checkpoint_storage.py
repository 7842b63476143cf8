# Copyright (c) Microsoft Corporation. Licensed under the MIT License.
#
# Vendored for mindstore from github.com/microsoft/agent-framework, commit
# 5eb3eb745e16324ac7bffb1dbe006d8f13c8d993, python/packages/azure-cosmos/tests/
# test_cosmos_checkpoint_storage.py (the tests of CosmosCheckpointStorage, the
# framework's database-backed checkpoint storage).
# What changed, and only this:
# * test_cosmos_checkpoint_storage_roundtrip_with_emulator, the test that runs the storage
#   against a database, runs as upstream wrote it with the storage swapped:
#   `CosmosCheckpointStorage(...)` is conftest.py's `checkpoint_storage(...)` (mindstore on
#   the suite's store); its emulator settings, skip marks and database clean-up are removed;
# * the allowed-types tests (8) and test_round_trip_preserves_data drive a mocked Cosmos
#   container: each stored document a mock returned is here stored by `save` through a
#   storage that allows the type (`_write`), and read back by the storage under test,
#   keeping each test's name, data and assertions;
# * left out, as they check the Cosmos client's calls, set-up and lifetime (query
#   arguments, partition keys, upserts, owned clients: no mindstore counterpart): the
#   init (5), save (2), load (4), list (4), delete (3), get_latest (3), list ids (2) and
#   close/context-manager (5) tests on the mocked container.
# ruff: noqa

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from agent_framework._workflows._checkpoint import WorkflowCheckpoint
from agent_framework.exceptions import WorkflowCheckpointException

from .conftest import checkpoint_storage


def CosmosCheckpointStorage(*, allowed_checkpoint_types: list[str] | None = None, **_: Any):
    return checkpoint_storage(allowed_checkpoint_types or ())


async def _write(checkpoint: WorkflowCheckpoint) -> None:
    """Store a checkpoint as the mocks' documents were: through a storage allowing its types."""
    await checkpoint_storage([_APP_STATE_TYPE_KEY]).save(checkpoint)


def _make_checkpoint(
    workflow_name: str = "test-workflow",
    checkpoint_id: str | None = None,
    previous_checkpoint_id: str | None = None,
    timestamp: str | None = None,
) -> WorkflowCheckpoint:
    """Create a minimal WorkflowCheckpoint for testing."""
    return WorkflowCheckpoint(
        workflow_name=workflow_name,
        graph_signature_hash="abc123",
        checkpoint_id=checkpoint_id or str(uuid.uuid4()),
        previous_checkpoint_id=previous_checkpoint_id,
        timestamp=timestamp or "2025-01-01T00:00:00+00:00",
        state={"counter": 42},
        iteration_count=1,
    )


async def test_round_trip_preserves_data() -> None:
    checkpoint = _make_checkpoint(
        checkpoint_id="cp-roundtrip",
        previous_checkpoint_id="cp-parent",
    )
    checkpoint.state = {"key": "value", "nested": {"a": 1}}
    checkpoint.metadata = {"superstep": 3}
    checkpoint.iteration_count = 5

    storage = CosmosCheckpointStorage()
    await storage.save(checkpoint)

    loaded = await storage.load("cp-roundtrip")

    assert loaded.checkpoint_id == checkpoint.checkpoint_id
    assert loaded.workflow_name == checkpoint.workflow_name
    assert loaded.graph_signature_hash == checkpoint.graph_signature_hash
    assert loaded.previous_checkpoint_id == "cp-parent"
    assert loaded.state == {"key": "value", "nested": {"a": 1}}
    assert loaded.metadata == {"superstep": 3}
    assert loaded.iteration_count == 5
    assert loaded.version == "1.0"


async def test_cosmos_checkpoint_storage_roundtrip_with_emulator() -> None:
    if True:
        storage = CosmosCheckpointStorage()

        try:
            # Save two checkpoints for the same workflow
            cp1 = _make_checkpoint(
                checkpoint_id="cp-int-1",
                workflow_name="integration-wf",
                timestamp="2025-01-01T00:00:00+00:00",
            )
            cp2 = _make_checkpoint(
                checkpoint_id="cp-int-2",
                workflow_name="integration-wf",
                previous_checkpoint_id="cp-int-1",
                timestamp="2025-01-02T00:00:00+00:00",
            )
            cp2.state = {"step": 2}

            await storage.save(cp1)
            await storage.save(cp2)

            # Load by ID
            loaded = await storage.load("cp-int-1")
            assert loaded.checkpoint_id == "cp-int-1"
            assert loaded.workflow_name == "integration-wf"

            # List all checkpoints for workflow
            all_cps = await storage.list_checkpoints(workflow_name="integration-wf")
            assert len(all_cps) == 2

            # List checkpoint IDs
            ids = await storage.list_checkpoint_ids(workflow_name="integration-wf")
            assert "cp-int-1" in ids
            assert "cp-int-2" in ids

            # Get latest
            latest = await storage.get_latest(workflow_name="integration-wf")
            assert latest is not None
            assert latest.checkpoint_id == "cp-int-2"
            assert latest.state == {"step": 2}

            # Delete
            assert await storage.delete("cp-int-1") is True
            assert await storage.delete("cp-int-1") is False

            remaining = await storage.list_checkpoint_ids(workflow_name="integration-wf")
            assert remaining == ["cp-int-2"]

            # Cross-workflow isolation
            other_cp = _make_checkpoint(
                checkpoint_id="cp-other",
                workflow_name="other-wf",
            )
            await storage.save(other_cp)
            wf_cps = await storage.list_checkpoints(workflow_name="integration-wf")
            assert len(wf_cps) == 1
            assert wf_cps[0].checkpoint_id == "cp-int-2"

        finally:
            pass




@dataclass
class _AppState:
    """Application-defined state type used to test allowed_checkpoint_types."""

    label: str
    count: int


_APP_STATE_TYPE_KEY = f"{_AppState.__module__}:{_AppState.__qualname__}"


def _make_checkpoint_with_state(state: dict[str, Any]) -> WorkflowCheckpoint:
    """Create a checkpoint with custom state for serialization tests."""
    return WorkflowCheckpoint(
        workflow_name="test-workflow",
        graph_signature_hash="abc123",
        timestamp="2025-01-01T00:00:00+00:00",
        state=state,
        iteration_count=1,
    )


async def test_init_accepts_allowed_checkpoint_types() -> None:
    """CosmosCheckpointStorage.__init__ accepts allowed_checkpoint_types."""
    storage = CosmosCheckpointStorage(
        allowed_checkpoint_types=["some.module:SomeType"],
    )
    assert storage is not None


async def test_load_allows_builtin_safe_types() -> None:
    """Built-in safe types load without opt-in via allowed_checkpoint_types."""
    from datetime import datetime, timezone

    checkpoint = _make_checkpoint_with_state({
        "ts": datetime(2025, 1, 1, tzinfo=timezone.utc),
        "tags": {1, 2, 3},
    })
    await _write(checkpoint)

    storage = CosmosCheckpointStorage()
    loaded = await storage.load(checkpoint.checkpoint_id)

    assert loaded.state["ts"] == datetime(2025, 1, 1, tzinfo=timezone.utc)
    assert loaded.state["tags"] == {1, 2, 3}


async def test_load_blocks_unlisted_app_type() -> None:
    """Application types are blocked when not listed in allowed_checkpoint_types."""
    checkpoint = _make_checkpoint_with_state({"data": _AppState(label="x", count=1)})
    await _write(checkpoint)

    storage = CosmosCheckpointStorage()

    with pytest.raises(WorkflowCheckpointException, match="deserialization blocked"):
        await storage.load(checkpoint.checkpoint_id)


async def test_load_allows_listed_app_type() -> None:
    """Application types are allowed when listed in allowed_checkpoint_types."""
    checkpoint = _make_checkpoint_with_state({"data": _AppState(label="ok", count=7)})
    await _write(checkpoint)

    storage = CosmosCheckpointStorage(
        allowed_checkpoint_types=[_APP_STATE_TYPE_KEY],
    )
    loaded = await storage.load(checkpoint.checkpoint_id)

    assert isinstance(loaded.state["data"], _AppState)
    assert loaded.state["data"].label == "ok"
    assert loaded.state["data"].count == 7


async def test_list_checkpoints_blocks_unlisted_app_type() -> None:
    """list_checkpoints skips documents with unlisted application types."""
    checkpoint = _make_checkpoint_with_state({"data": _AppState(label="x", count=1)})
    await _write(checkpoint)

    storage = CosmosCheckpointStorage()
    results = await storage.list_checkpoints(workflow_name="test-workflow")

    # The document is skipped (logged as warning) because the type is blocked
    assert len(results) == 0


async def test_list_checkpoints_allows_listed_app_type() -> None:
    """list_checkpoints decodes documents with listed application types."""
    checkpoint = _make_checkpoint_with_state({"data": _AppState(label="ok", count=3)})
    await _write(checkpoint)

    storage = CosmosCheckpointStorage(
        allowed_checkpoint_types=[_APP_STATE_TYPE_KEY],
    )
    results = await storage.list_checkpoints(workflow_name="test-workflow")

    assert len(results) == 1
    assert isinstance(results[0].state["data"], _AppState)


async def test_get_latest_blocks_unlisted_app_type() -> None:
    """get_latest raises when the checkpoint contains an unlisted application type."""
    checkpoint = _make_checkpoint_with_state({"data": _AppState(label="x", count=1)})
    await _write(checkpoint)

    storage = CosmosCheckpointStorage()

    with pytest.raises(WorkflowCheckpointException, match="deserialization blocked"):
        await storage.get_latest(workflow_name="test-workflow")


async def test_get_latest_allows_listed_app_type() -> None:
    """get_latest decodes checkpoints with listed application types."""
    checkpoint = _make_checkpoint_with_state({"data": _AppState(label="latest", count=9)})
    await _write(checkpoint)

    storage = CosmosCheckpointStorage(
        allowed_checkpoint_types=[_APP_STATE_TYPE_KEY],
    )
    result = await storage.get_latest(workflow_name="test-workflow")

    assert result is not None
    assert isinstance(result.state["data"], _AppState)
    assert result.state["data"].label == "latest"
