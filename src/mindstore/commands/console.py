"""`mindstore console`: serve the read-only operator console (`mindstore.console`).

It binds to 127.0.0.1 unless told otherwise, and a host other than localhost needs
`--allow-remote` as well (serve it behind TLS then, with `--secure-cookies`). Operators come
from `--operators FILE` (a JSON list of `{"name", "token", "tenants"}`); without one, a
single operator who sees every tenant is made with a fresh token, printed once on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, TypedDict

import typer

from mindstore.commands.common import open_store, run
from mindstore.errors import ConfigurationError, ConsoleError

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
LOCAL_NAMES = ("127.0.0.1", "localhost")
"""The names a browser on this machine reaches a local console by (the `Host` allow-list)."""
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::"})


class AppOptions(TypedDict):
    """What the command hands `mindstore.console.app` besides the store and operators."""

    secure_cookies: bool
    allowed_hosts: list[str]
    session_idle: float
    session_max: float


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
                "--secure-cookies",
                help="Mark the session cookie Secure and send HSTS (served over HTTPS).",
            ),
        ] = False,
        allowed_host: Annotated[
            list[str] | None,
            typer.Option(
                "--allowed-host",
                help="A host name the console is reached by (repeatable); others get 400.",
            ),
        ] = None,
        session_idle: Annotated[
            int,
            typer.Option("--session-idle", min=60, help="Seconds before an unused session ends."),
        ] = 1800,
        session_max: Annotated[
            int, typer.Option("--session-max", min=60, help="Seconds a session lasts at most.")
        ] = 43200,
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
        names = [*(allowed_host or [])]
        if host in WILDCARD_HOSTS and not names:
            raise typer.BadParameter(
                f"{host} listens on every address: name the host names it is reached by",
                param_hint="--allowed-host",
            )
        if host not in WILDCARD_HOSTS:
            names += [host, *(LOCAL_NAMES if host in LOCAL_HOSTS else ())]
        options = AppOptions(
            secure_cookies=secure_cookies,
            allowed_hosts=sorted(set(names)),
            session_idle=float(session_idle),
            session_max=float(session_max),
        )
        run(_serve(ctx, host, port, text, options))


async def _serve(
    ctx: typer.Context, host: str, port: int, operators: str | None, options: AppOptions
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
            app(store, people, **options),
            host=host,
            port=port,
            log_level="warning",
            lifespan="off",
        )
        await uvicorn.Server(config).serve()
