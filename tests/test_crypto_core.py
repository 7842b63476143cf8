"""The pure core of per-tenant encryption: ciphertext format, field split, key wrap."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import bson
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.crypto import LocalMasterKey, aead
from mindstore.crypto.aead import OVERHEAD, is_sealed, key_version, open_value, seal_value
from mindstore.crypto.fields import open_document, seal_at, seal_document
from mindstore.crypto.keyring import MissingKey, TenantKeys
from mindstore.errors import ConfigurationError, CryptoError, KeyShredded

KEY = AESGCM(os.urandom(32))
CONTEXT = ("acme", "task-1", "m1", "content.0.text")


def keys(*versions: int) -> TenantKeys:
    held = TenantKeys("acme")
    for version in versions or (1,):
        held.keys[version] = AESGCM(os.urandom(32))
    return held


key_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=5
)
json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**62), 2**62),
    st.floats(allow_nan=False), st.text(st.characters(blacklist_categories=["Cs"])), st.binary(),
)  # fmt: skip
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(key_text, inner, max_size=4),
    max_leaves=12,
)


@given(json_value)
def test_any_value_round_trips_with_its_types(value: Any) -> None:
    sealed = seal_value(value, KEY, 3, CONTEXT)
    assert is_sealed(sealed) and key_version(sealed) == 3
    opened = open_value(sealed, lambda v: KEY, CONTEXT)
    assert opened == value
    # the same BSON: the same types (an int beyond 32 bits reads as bson's Int64, as it
    # does from a server)
    assert bson.encode({"": opened}) == bson.encode({"": value})


@given(st.text(min_size=1))
def test_text_costs_a_fixed_overhead(text: str) -> None:
    sealed = seal_value(text, KEY, 1, CONTEXT)
    assert len(sealed) == len(text.encode()) + OVERHEAD
    # stored: a binary costs what a string costs around its bytes (length + 1 byte)
    assert len(bson.encode({"v": sealed})) - len(bson.encode({"v": text})) == OVERHEAD


@pytest.mark.parametrize("index", [0, 1, 5, 20, -1])
def test_a_changed_byte_is_refused(index: int) -> None:
    sealed = bytearray(seal_value("secret", KEY, 1, CONTEXT))
    sealed[index] ^= 0x01
    with pytest.raises(CryptoError):
        open_value(bson.Binary(bytes(sealed), 0x8E), lambda v: KEY, CONTEXT)


@pytest.mark.parametrize("moved", [
    ("other", "task-1", "m1", "content.0.text"),
    ("acme", "task-2", "m1", "content.0.text"),
    ("acme", "task-1", "m2", "content.0.text"),
    ("acme", "task-1", "m1", "content.1.text"),
    ("acme", "task-1", "m1", "metadata"),
])  # fmt: skip
def test_a_moved_ciphertext_is_refused(moved: tuple[str, str, str, str]) -> None:
    sealed = seal_value("secret", KEY, 1, CONTEXT)
    with pytest.raises(CryptoError, match="was not sealed there"):
        open_value(sealed, lambda v: KEY, moved)


def test_a_swapped_key_version_is_refused() -> None:
    other = AESGCM(os.urandom(32))
    sealed = bytearray(seal_value("secret", KEY, 1, CONTEXT))
    sealed[1] = 2  # claims version 2: the header is authenticated, and key 2 is another key
    with pytest.raises(CryptoError):
        open_value(bson.Binary(bytes(sealed), 0x8E), {1: KEY, 2: other}.__getitem__, CONTEXT)


LEGACY_CONTEXT = ("acme", "task-1", "", "task.content.text")
NEW_CONTEXT = ("acme", "task-1", "", "task.content.0.text")


def sealed_in_format_1(value: Any, monkeypatch: pytest.MonkeyPatch) -> bson.Binary:
    """What the previous release stored: the same layout with format 1 in the header."""
    with monkeypatch.context() as patched:
        patched.setattr(aead, "FORMAT", aead.LEGACY_FORMAT)
        return seal_value(value, KEY, 1, LEGACY_CONTEXT)


def test_format_1_opens_with_its_old_binding_until_the_tenant_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = sealed_in_format_1("secret", monkeypatch)
    assert aead.sealed_format(old) == aead.LEGACY_FORMAT
    assert not aead.is_current(old, 1)  # the sweep re-seals it
    found = open_value(old, lambda v: KEY, NEW_CONTEXT, legacy_context=LEGACY_CONTEXT)
    assert found == "secret"
    with pytest.raises(CryptoError, match="format 1"):
        open_value(old, lambda v: KEY, NEW_CONTEXT, legacy_context=LEGACY_CONTEXT, legacy=False)
    new = seal_value("secret", KEY, 1, NEW_CONTEXT)
    assert aead.sealed_format(new) == aead.FORMAT and aead.is_current(new, 1)
    # a format-2 ciphertext never opens with the old binding
    with pytest.raises(CryptoError, match="was not sealed there"):
        open_value(new, lambda v: KEY, LEGACY_CONTEXT, legacy_context=LEGACY_CONTEXT)


def test_the_format_in_the_header_cannot_be_changed() -> None:
    """Format 2 relabelled as format 1 would open with the older, looser binding: the
    header is authenticated, so it does not open at all."""
    sealed = bytearray(seal_value("secret", KEY, 1, CONTEXT))
    sealed[0] = aead.LEGACY_FORMAT << 4 | (sealed[0] & 0x0F)
    with pytest.raises(CryptoError, match="was not sealed there"):
        open_value(bson.Binary(bytes(sealed), 0x8E), lambda v: KEY, CONTEXT)
    sealed[0] = 3 << 4 | (sealed[0] & 0x0F)
    with pytest.raises(CryptoError, match="known format"):
        open_value(bson.Binary(bytes(sealed), 0x8E), lambda v: KEY, CONTEXT)


def message_doc() -> dict[str, Any]:
    return {
        "id": "m1", "role": "assistant", "started_ts": 1.5, "finished_ts": None,
        "status": "completed", "tokens_in": 7, "model_id": "gpt-x", "scope": "s1", "depth": 1,
        "name": "Alice", "metadata": {"k": "private note"},
        "content": [
            {"type": "text", "text": "hello secret", "\u00a7more": [" more secret", " and more"]},
            {"type": "reasoning", "reasoning": "thinking secret", "started_ts": 2.0},
            {"type": "toolCall", "tool_call_id": "c1", "tool_name": "search",
             "args": {"q": "secret query", "$ref": 1}, "is_loading": False},
            {"type": "toolResult", "tool_call_id": "c1", "tool_name": "search",
             "result": {"hits": ["secret hit"]}, "is_error": False,
             "tool_result_contents": [{"type": "image", "image_data": "c2VjcmV0"}]},
            {"type": "image", "image": "data:image/png;base64,c2VjcmV0", "mime_type": "image/png"},
            {"type": "audio", "audio": [b"secret bytes"], "transcript": "secret words"},
            {"type": "taskentry", "initial_task_config": {"type": "taskconfig",
             "model_name": "gpt-y", "user_prompt": "secret prompt"}, "trigger_call_id": None},
            {"type": "compression", "start_message_idx": 0, "end_message_idx": 3,
             "reason": "secret reason", "cache": {"summary": "secret summary"},
             "metadata": {"checkpoint": {"compressed_message_ids": ["a"]}}},
            "a bare string part",
        ],
    }  # fmt: skip


CLEAR = {
    "id",
    "role",
    "started_ts",
    "finished_ts",
    "status",
    "tokens_in",
    "model_id",
    "scope",
    "depth",
}


def secrets_in(value: Any) -> list[str]:
    found: list[str] = []
    if isinstance(value, (str, bytes)):
        text = value if isinstance(value, str) else value.decode("latin-1")
        if "secret" in text or "Alice" in text or "private" in text or "c2VjcmV0" in text:
            found.append(text)
    elif isinstance(value, dict):
        for key, item in value.items():
            found += secrets_in(key) + secrets_in(item)
    elif isinstance(value, list):
        for item in value:
            found += secrets_in(item)
    return found


def test_seal_document_hides_content_and_keeps_the_analytics_fields() -> None:
    held = keys(1)
    document = message_doc()
    sealed = seal_document(document, held, "acme", "task-1")
    assert not [s for s in secrets_in(sealed) if not isinstance(s, bytes)]
    assert not any(b"secret" in bytes(v) for v in _binaries(sealed) if not is_sealed(v))
    for name in CLEAR:
        assert sealed[name] == document[name]
    parts = sealed["content"]
    assert [p["type"] for p in parts[:-1]] == [p["type"] for p in document["content"][:-1]]
    assert parts[2]["tool_name"] == "search" and parts[2]["tool_call_id"] == "c1"
    assert parts[6]["initial_task_config"]["model_name"] == "gpt-y"
    assert parts[7]["metadata"] == {"checkpoint": {"compressed_message_ids": ["a"]}}
    assert is_sealed(parts[7]["cache"]) and is_sealed(parts[-1])
    assert open_document(sealed, held, "acme", "task-1") == document
    assert document == message_doc()  # the input is not changed


def _binaries(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [b for item in value.values() for b in _binaries(item)]
    if isinstance(value, list):
        return [b for item in value for b in _binaries(item)]
    return [value] if isinstance(value, bytes) else []


@pytest.mark.parametrize(
    "path",
    [
        "",
        "content",
        "content.2",
        "content.0.text",
        "finished_ts",
        "content.2.is_loading",
        "content.6.initial_task_config",
        "content.6.initial_task_config.user_prompt",
        "status",
        "name",
        "content.0.\u00a7more",
        "content.0.\u00a7more.1",
    ],
)
def test_a_patch_seals_what_a_whole_seal_puts_there(path: str) -> None:
    """Patching a path then opening the message gives what sealing it whole gives."""
    held = keys(1)
    document = message_doc()
    target: Any = document
    steps = path.split(".") if path else []
    for step in steps:
        target = target[int(step)] if isinstance(target, list) else target[step]
    patched_value = seal_at(target, path, held, "acme", "task-1", "m1")
    sealed = seal_document(document, held, "acme", "task-1")
    if steps:
        container: Any = sealed
        for step in steps[:-1]:
            container = container[int(step)] if isinstance(container, list) else container[step]
        last = steps[-1]
        container[int(last) if isinstance(container, list) else last] = patched_value
    else:
        sealed = patched_value
    assert open_document(sealed, held, "acme", "task-1") == document


def test_streamed_chunks_are_sealed_one_by_one_and_bound_to_their_index() -> None:
    held = keys(1)
    sealed = seal_document(message_doc(), held, "acme", "task-1")
    chunks = sealed["content"][0]["\u00a7more"]
    assert len(chunks) == 2 and all(is_sealed(chunk) for chunk in chunks)
    assert open_document(sealed, held, "acme", "task-1") == message_doc()
    sealed["content"][0]["\u00a7more"] = [chunks[1], chunks[0]]  # reordered
    with pytest.raises(CryptoError):
        open_document(sealed, held, "acme", "task-1")
    sealed["content"][0]["\u00a7more"] = chunks
    sealed["content"][1]["\u00a7more"] = [chunks[0]]  # moved to another part
    with pytest.raises(CryptoError):
        open_document(sealed, held, "acme", "task-1")


def test_a_patch_inside_a_sealed_field_is_refused() -> None:
    with pytest.raises(CryptoError):
        seal_at("x", "content.2.args.q", keys(1), "acme", "t", "m1")
    with pytest.raises(CryptoError):
        seal_at("x", "metadata.k", keys(1), "acme", "t", "m1")


def test_a_moved_message_or_field_is_refused() -> None:
    held = keys(1)
    sealed = seal_document(message_doc(), held, "acme", "task-1")
    with pytest.raises(CryptoError):
        open_document(sealed, held, "acme", "task-2")
    with pytest.raises(CryptoError):
        open_document(sealed, held, "globex", "task-1")
    swapped = dict(sealed, content=[sealed["content"][1], sealed["content"][0]])
    with pytest.raises(CryptoError):
        open_document(swapped, held, "acme", "task-1")
    renamed = dict(sealed, id="m2")
    with pytest.raises(CryptoError):
        open_document(renamed, held, "acme", "task-1")


def test_old_versions_stay_readable_and_new_seals_use_the_newest() -> None:
    held = keys(1)
    old = seal_document(message_doc(), held, "acme", "t")
    held.keys[2] = AESGCM(os.urandom(32))
    new = seal_document(message_doc(), held, "acme", "t")
    assert key_version(new["content"][0]["text"]) == 2
    assert key_version(old["content"][0]["text"]) == 1
    assert open_document(old, held, "acme", "t") == open_document(new, held, "acme", "t")
    del held.keys[1]
    with pytest.raises(MissingKey):
        open_document(old, held, "acme", "t")
    held.shredded = True
    with pytest.raises(KeyShredded):
        open_document(new, held, "acme", "t")


def test_a_plaintext_document_reads_as_it_is() -> None:
    document = message_doc()
    assert open_document(document, keys(1), "acme", "t") is document


@settings(max_examples=50)
@given(st.dictionaries(st.sampled_from(["text", "reasoning", "args", "result", "x", "type"]),
                       json_value, max_size=5))  # fmt: skip
def test_any_part_round_trips(part: dict[str, Any]) -> None:
    held = keys(1)
    document = {"id": "m", "role": "user", "content": [part], "metadata": part}
    assert open_document(seal_document(document, held, "a", "t"), held, "a", "t") == document


# ----------------------------------------------------------------------------- master key


def test_local_master_key_wraps_bound_to_its_context(tmp_path: Any) -> None:
    master = LocalMasterKey.generate()
    wrapped = asyncio.run(master.wrap(b"k" * 32, b"acme/1"))
    assert asyncio.run(master.unwrap(wrapped, b"acme/1")) == b"k" * 32
    with pytest.raises(CryptoError):
        asyncio.run(master.unwrap(wrapped, b"globex/1"))
    with pytest.raises(CryptoError):
        asyncio.run(LocalMasterKey.generate().unwrap(wrapped, b"acme/1"))


def test_local_master_key_from_file(tmp_path: Any) -> None:
    raw = os.urandom(32)
    (tmp_path / "raw.key").write_bytes(raw)
    (tmp_path / "hex.key").write_text(raw.hex() + "\n")
    assert LocalMasterKey.from_file(tmp_path / "raw.key").key_id == LocalMasterKey(raw).key_id
    assert LocalMasterKey.from_file(tmp_path / "hex.key").key_id == LocalMasterKey(raw).key_id
    (tmp_path / "bad.key").write_text("not a key")
    with pytest.raises(ConfigurationError, match=r"bad\.key"):
        LocalMasterKey.from_file(tmp_path / "bad.key")
    with pytest.raises(ConfigurationError, match=r"missing\.key"):
        LocalMasterKey.from_file(tmp_path / "missing.key")
    with pytest.raises(ConfigurationError):
        LocalMasterKey(b"short")
