"""The read-only console, started with a keyring over tenants stored in the clear, changes no
tenant's encryption state: serving every page (search included) makes no data key and no
key in the vault, so the application, which runs without a keyring, keeps writing its
tenants (docs/encryption.md, "Search under a keyring"; docs/console.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from console_support import ADMIN_TOKEN, demo
from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey
from mindstore.store import Store
from test_console_app import bearer, client_for, first_task, urls


async def stored(store: Store) -> dict[str, list[Any]]:
    """Every document of every collection but the search index's own (`search_*`), which
    a search brings up to date by design."""
    names = sorted(await store.database.list_collection_names())
    return {
        name: sorted(await store.database[name].find({}).to_list(None), key=lambda d: str(d["_id"]))
        for name in names
        if not name.startswith("search_")
    }


def vault_files(vault: Path) -> list[str]:
    return sorted(str(p.relative_to(vault)) for p in vault.rglob("*")) if vault.exists() else []


async def test_every_page_on_a_keyring_store_over_plaintext_tenants_makes_no_key(
    store: Store, tmp_path: Path
) -> None:
    ids = await demo(store)  # written by the application, without a keyring
    vault = tmp_path / "vault"
    console = Store(
        store.backend, keyring=Keyring(LocalKeyVault(vault, LocalMasterKey(bytes(range(32)))))
    )
    before, files = await stored(store), vault_files(vault)
    async with await client_for(console) as client:
        pages = ["/"]
        for tenant in ("tenant-0", "tenant-1"):
            task_id = await first_task(client, tenant, ADMIN_TOKEN)
            pages += urls(tenant, task_id)
            pages += [f"/t/{tenant}/search?q=replacement", f"/t/{tenant}/search?q=the+tool"]
        pages += [f"/t/tenant-0/tasks/{ids['xss']}", f"/t/tenant-0/tree/{ids['nested']}"]
        for page in pages:
            answer = await client.get(page, headers=bearer(ADMIN_TOKEN))
            assert answer.status_code == 200, page
            assert "keyring" not in answer.text.lower() or page == "/", page
        found = await client.get("/t/tenant-0/search?q=replacement", headers=bearer(ADMIN_TOKEN))
        assert "/t/tenant-0/tasks/" in found.text  # the search did find something
    assert await stored(store) == before
    assert vault_files(vault) == files == []
    assert await store.database["data_keys"].count_documents({}) == 0
    # the application, without a keyring, still writes both tenants
    for tenant in ("tenant-0", "tenant-1"):
        made = await store.scoped(tenant).tasks.create(owner="ann", title="after the console")
        await store.scoped(tenant).tasks.add_human_message(made.id, "still in the clear")
