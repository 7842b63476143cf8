"""What the blind search index tells someone who reads the database (docs/encryption.md,
"Search under a keyring"), measured on the demo workload.

A passive reader sees tokens, never words, but each token's document frequency is its
word's: ranking the tokens ranks the words. An active attacker, who can also add messages
to the tenant (any user of the application), learns the token of every word it guesses
(it writes the word, and its own message's posting appears under that token) and with it
every other message that holds the word.

`exposure` is the measurement; the figures in the docs come from it on the default demo
data (`python tests/test_search_blind_exposure.py`, which also checks the top tokens'
words against a public English word list when one is installed).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import mindstore
from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey
from mindstore.search.blind import Blinder, derive_search_key
from mindstore.search.index import stats_id, unpack
from mindstore.search.text import searchable
from mindstore.search.tokenize import terms
from mindstore.store import Store
from mindstore.workload import WorkloadSpec, generate, load

TENANT = "tenant-0"
GUESSES = ("refund", "charge", "replacement", "idempotency", "order")
WORD_LIST = Path("/usr/share/dict/american-english")


@dataclass
class Exposure:
    """What the database shows of one tenant's index."""

    messages: int = 0
    tokens: int = 0
    guessed: dict[str, bool] = field(default_factory=dict)
    """Guessed word -> the attacker's token for it is the word's true token."""
    holders: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Guessed word -> (messages the attacker found holding it, messages that do)."""
    top: list[tuple[str, int, int]] = field(default_factory=list)
    """The ten most frequent tokens: their true word, in how many messages the token is,
    and in how many the word is."""


async def postings(store: Store, tenant: str) -> dict[str, set[tuple[str, int]]]:
    """Token -> the (task, message index) holding it, as a database reader sees them."""
    found: dict[str, set[tuple[str, int]]] = {}
    tasks = {  # a group names its task by ordinal; the chunks, in clear, name both
        chunk["r"]: chunk["task"]
        async for chunk in store.database["search_entries"].find({"tenant": tenant})
    }
    async for document in store.database["search_postings"].find({"tenant": tenant}):
        if document["_id"] == stats_id(tenant):
            continue
        token = str(document["_id"]).split("/")[1]
        for group in document.get("e") or []:
            found.setdefault(token, set()).update(
                (tasks[p.ordinal], p.index) for p in unpack(group)
            )
    return found


async def exposure(spec: WorkloadSpec, vault: Path, guesses: tuple[str, ...]) -> Exposure:
    store = await mindstore.connect(
        "embedded", keyring=Keyring(LocalKeyVault(vault, LocalMasterKey(bytes(range(32)))))
    )
    try:
        await load(store, generate(spec))
        keyring = store.keyring
        assert keyring is not None
        await keyring.reencrypt(TENANT)  # the demo tenant, encrypted and sealed
        view = store.scoped(TENANT)
        await view.search("hotel")  # the index is built by a search
        before = await postings(store, TENANT)
        # ground truth, which the attacker does not have: every message's words, the key
        words_of: dict[tuple[str, int], set[str]] = {}
        async for task in store.database["tasks"].find({"tenant": TENANT}, {"_id": 1}):
            task_id = str(task["_id"]).split("/", 1)[1]
            for index, message in enumerate(await view.tasks.read_range(task_id)):
                words_of[(task_id, index)] = set(terms(searchable(message).text, None))
        _, data_key = (await keyring.keys(TENANT)).current()
        blind = Blinder(derive_search_key(data_key, TENANT))
        result = Exposure(messages=len(words_of), tokens=len(before))
        # the active attacker: one message per guess, then reads the postings
        for word in guesses:
            mine = await view.tasks.create(owner="mallory", title="notes")
            await view.tasks.add_human_message(mine.id, word)
            await view.search("anything")
            after = await postings(store, TENANT)
            token = next(t for t, held in after.items() if any(m == mine.id for m, _ in held))
            result.guessed[word] = token == blind(word)
            found = {held for held in after[token] if held[0] != mine.id}
            truth = {held for held, words in words_of.items() if word in words}
            result.holders[word] = (len(found & truth), len(truth))
        # the passive reader: tokens ranked by how many messages hold them
        frequency = Counter({token: len(held) for token, held in before.items()})
        word_of = {blind(w): w for words in words_of.values() for w in words}
        counts = Counter(w for words in words_of.values() for w in words)
        result.top = [(word_of[t], n, counts[word_of[t]]) for t, n in frequency.most_common(10)]
        return result
    finally:
        await store.close()


async def test_an_active_writer_learns_the_token_of_each_word_it_guesses(tmp_path: Path) -> None:
    spec = WorkloadSpec(tenants=1, owners_per_tenant=2, tasks=6, mean_messages=10, fork_every=0)
    found = await exposure(spec, tmp_path / "vault", GUESSES)
    assert found.guessed == dict.fromkeys(GUESSES, True)  # 5 of 5
    for word, (seen, held) in found.holders.items():
        assert seen == held > 0, word  # and every message that holds the word
    # a passive reader ranks the words: a token's frequency is its word's
    assert len(found.top) == 10
    assert all(token == word for _, token, word in found.top)


def main() -> None:  # pragma: no cover - the measurement for the docs
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        found = asyncio.run(exposure(WorkloadSpec(), Path(directory) / "vault", GUESSES))
    print(f"{TENANT}: {found.messages} messages, {found.tokens} tokens")
    print(f"guessed tokens right: {sum(found.guessed.values())} of {len(found.guessed)}")
    for word, (seen, held) in found.holders.items():
        print(f"  {word}: the attacker finds {seen} of the {held} messages holding it")
    print("top 10 tokens by messages holding them (their true words):", found.top)
    if WORD_LIST.exists():
        english = {line.strip().lower() for line in WORD_LIST.read_text().splitlines()}
        listed = [w for w, _, _ in found.top if w in english]
        print(f"in {WORD_LIST}: {len(listed)} of 10: {listed}")


if __name__ == "__main__":  # pragma: no cover
    main()
