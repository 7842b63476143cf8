"""`mindstore mcp`: serve one tenant's conversations to MCP clients, read-only (docs/mcp.md).

On stdio by default: the client spawns the command and it runs as the local user over
the tenant `--tenant` names (and the owner `--owner` names). With `--http PORT` it serves
streamable HTTP at `/mcp` on 127.0.0.1 (another `--host` needs `--allow-remote`; serve it
behind TLS then), behind bearer tokens: `--credentials FILE` (a JSON list of `{"name",
"token", "tenant", "owner"?}`), or without one a single credential for `--tenant` (and
`--owner`) with a fresh token, printed once on stderr. A `--data` file is read and never
written back (a search brings the index up to date in memory only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mindstore.commands.common import open_store, require_tenant, run
from mindstore.commands.console import LOCAL_HOSTS
from mindstore.errors import ConfigurationError


def register(app: typer.Typer) -> None:
    """Add this module's command to the root app."""

    @app.command("mcp")
    def mcp_command(
        ctx: typer.Context,
        tenant: Annotated[
            str | None,
            typer.Option("--tenant", envvar="MINDSTORE_TENANT", help="The tenant to serve."),
        ] = None,
        owner: Annotated[
            str | None, typer.Option("--owner", help="Only this owner's conversations.")
        ] = None,
        http: Annotated[
            int | None,
            typer.Option("--http", min=1, max=65535, help="Serve streamable HTTP on this port."),
        ] = None,
        host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
        allow_remote: Annotated[
            bool, typer.Option("--allow-remote", help="Allow a --host other than localhost.")
        ] = False,
        credentials: Annotated[
            Path | None,
            typer.Option(
                "--credentials", help="JSON file of HTTP credentials: name, token, tenant, owner."
            ),
        ] = None,
    ) -> None:
        """Serve a tenant's conversations over MCP, read-only (needs the `mcp` extra)."""
        if http is None and credentials is not None:
            raise typer.BadParameter("credentials are for --http", param_hint="--credentials")
        if host not in LOCAL_HOSTS and not allow_remote:
            raise typer.BadParameter(
                f"{host} is not localhost: pass --allow-remote to listen there", param_hint="--host"
            )
        if credentials is not None and (tenant is not None or owner is not None):
            raise typer.BadParameter(
                "each credential names its tenant and owner: drop --tenant and --owner",
                param_hint="--credentials",
            )
        text = None
        if credentials is not None:
            try:
                text = credentials.read_text(encoding="utf-8")
            except OSError as error:
                raise typer.BadParameter(
                    f"{credentials}: {error.strerror or error}", param_hint="--credentials"
                ) from None
        if http is None:
            run(_stdio(ctx, tenant, owner))
        else:
            run(_http(ctx, tenant, owner, text, host, http))


def _missing_extra(error: ImportError) -> ConfigurationError:
    return ConfigurationError(
        f"the MCP server needs its extra: pip install 'mindstore[mcp]' ({error.name})"
    )


async def _stdio(ctx: typer.Context, tenant: str | None, owner: str | None) -> None:
    name = require_tenant(tenant)
    try:
        from mcp.server.stdio import stdio_server

        from mindstore.mcp import server
    except ImportError as error:
        raise _missing_extra(error) from None
    async with open_store(ctx, save=False) as store:
        served = server(store, tenant=name, owner=owner)
        async with stdio_server() as (read, write):
            await served.run(read, write, served.create_initialization_options())


async def _http(
    ctx: typer.Context,
    tenant: str | None,
    owner: str | None,
    text: str | None,
    host: str,
    port: int,
) -> None:
    try:
        import uvicorn

        from mindstore.mcp import (
            Credentials,
            credential,
            credentials_from_json,
            http_app,
            new_token,
        )
    except ImportError as error:
        raise _missing_extra(error) from None
    if text is not None:
        try:
            allowed = Credentials(credentials_from_json(text))
        except ConfigurationError as error:
            raise ConfigurationError(f"--credentials: {error}") from None
    else:
        name = require_tenant(tenant)
        token = new_token()
        allowed = Credentials([credential("local", token, name, owner)])
        scope = name if owner is None else f"{name}, owner {owner}"
        typer.echo(f"mcp: credential 'local' ({scope}), bearer token: {token}", err=True)
    async with open_store(ctx, save=False) as store:
        typer.echo(f"mcp: http://{host}:{port}/mcp", err=True)
        config = uvicorn.Config(
            http_app(store, allowed, host=host), host=host, port=port, log_level="warning"
        )
        await uvicorn.Server(config).serve()
