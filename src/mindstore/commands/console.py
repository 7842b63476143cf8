"""`mindstore console`: serve the read-only operator console (`mindstore.console`).

It binds to 127.0.0.1 unless told otherwise, and a host other than localhost needs
`--allow-remote` as well (serve it behind TLS then, with `--secure-cookies`). Operators come
from `--operators FILE` (a JSON list of `{"name", "token", "tenants"}`); without one, a
single operator who sees every tenant is made with a fresh token, printed once on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mindstore.commands.common import open_store, run
from mindstore.errors import ConfigurationError, ConsoleError

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def register(app: typer.Typer) -> None:
    """Add this module's command to the root app."""

    @app.command("console")
    def console_command(
        ctx: typer.Context,
        host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8077,
        operators: Annotated[
            Path | None,
            typer.Option(
                "--operators", help="JSON file of operators: name, token, tenants ('*': all)."
            ),
        ] = None,
        allow_remote: Annotated[
            bool, typer.Option("--allow-remote", help="Allow a --host other than localhost.")
        ] = False,
        secure_cookies: Annotated[
            bool,
            typer.Option(
                "--secure-cookies", help="Mark the session cookie Secure (served over HTTPS)."
            ),
        ] = False,
    ) -> None:
        """Serve the read-only operator console (needs the `console` extra)."""
        if host not in LOCAL_HOSTS and not allow_remote:
            raise typer.BadParameter(
                f"{host} is not localhost: pass --allow-remote to listen there", param_hint="--host"
            )
        text = None
        if operators is not None:
            try:
                text = operators.read_text(encoding="utf-8")
            except OSError as error:
                raise typer.BadParameter(
                    f"{operators}: {error.strerror or error}", param_hint="--operators"
                ) from None
        run(_serve(ctx, host, port, text, secure_cookies))


async def _serve(
    ctx: typer.Context, host: str, port: int, operators: str | None, secure_cookies: bool
) -> None:
    try:
        import uvicorn

        from mindstore.console import (
            Credentials,
            app,
            new_token,
            operator,
            operators_from_json,
        )
    except ImportError as error:
        raise ConsoleError(
            f"the console needs its extra: pip install 'mindstore[console]' ({error.name})"
        ) from None
    if operators is not None:
        try:
            # every check of the file (two operators with one token too) before serving
            people = Credentials(operators_from_json(operators))
        except ConfigurationError as error:
            raise ConsoleError(f"--operators: {error}") from None
    else:
        token = new_token()
        people = Credentials([operator("admin", token, "*")])
        typer.echo(f"console: operator 'admin' (every tenant), token: {token}", err=True)
    async with open_store(ctx, save=False) as store:
        typer.echo(f"console: http://{host}:{port}/", err=True)
        config = uvicorn.Config(
            app(store, people, secure_cookies=secure_cookies),
            host=host,
            port=port,
            log_level="warning",
            lifespan="off",
        )
        await uvicorn.Server(config).serve()
