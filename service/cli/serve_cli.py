"""`gangplank serve`, `migrate` and `keygen`: running the service and preparing what it runs on."""
from __future__ import annotations

import asyncio
import errno
import socket
from typing import TYPE_CHECKING, Any

import typer

from service.cli.common import DbOpt, console, db, fail, friendly, out
from service.config import Settings

if TYPE_CHECKING:
    from service.api.settings import ApiSettings


def serve(host: str = typer.Option("127.0.0.1", "--host", metavar="HOST",
                                   help="Address to listen on (loopback only while no token is configured)."),
          port: int = typer.Option(8000, "--port", metavar="PORT", help="TCP port to listen on (0: any free one)."),
          database_url: str | None = DbOpt,
          kafka_bootstrap: str | None = typer.Option(
              None, "--kafka-bootstrap", metavar="HOST:PORT",
              help="Kafka bootstrap server: consume commands and relay decisions "
                   "(env GANGPLANK_KAFKA_BOOTSTRAP; default: no Kafka)"),
          tokens: str | None = typer.Option(
              None, "--tokens", metavar="FILE",
              help="Access tokens file, JSON as in tokens.example.json (env GANGPLANK_TOKENS: a path or the "
                   "JSON itself; default: none, the API is open on loopback only)"),
          no_migrate: bool = typer.Option(False, "--no-migrate", help="Do not apply pending migrations at start."),
          kafka_idempotence: bool | None = typer.Option(
              None, "--kafka-idempotence/--no-kafka-idempotence",
              help="Idempotent Kafka producer; turn off for brokers without InitProducerId, such as Tansu "
                   "(env GANGPLANK_KAFKA_IDEMPOTENCE; default: on)"),
          signing_key: str | None = typer.Option(
              None, "--signing-key", metavar="FILE",
              help="Ed25519 private key (PEM, PKCS#8; gangplank keygen): sign each cluster's chain head every "
                   "1,000 events and at least once a minute (env GANGPLANK_SIGNING_KEY, "
                   "GANGPLANK_CHECKPOINT_EVENTS, GANGPLANK_CHECKPOINT_SECONDS)"),
          replica_id: str | None = typer.Option(
              None, "--replica-id", metavar="ID",
              help="This replica's id, on every answer as Gangplank-Replica (env GANGPLANK_REPLICA_ID; default: "
                   "<host>-<port>-<6 random hex digits>, new at every start)"),
          advertise_url: str | None = typer.Option(
              None, "--advertise-url", metavar="URL",
              help="The base URL at which other replicas reach this one (env GANGPLANK_ADVERTISE_URL; "
                   "default: http://<host>:<port>, a wildcard host replaced by the host name)")) -> None:
    """Run the HTTP API (and the Kafka consumer and outbox relay with --kafka-bootstrap)."""
    import uvicorn

    from service.api.settings import ApiSettings, TokenFileError, resolve_bind_host
    from service.bootstrap import build_app
    from service.logging import configure_logging

    configure_logging()
    from service.gcpause import configure_for_serving
    configure_for_serving()  # short collector pauses for a long-lived decider (service/gcpause.py)
    settings = Settings.from_env(database_url=database_url, host=host, port=port, tokens_file=tokens,
                                 kafka_bootstrap=kafka_bootstrap, kafka_idempotence=kafka_idempotence,
                                 signing_key=signing_key, replica_id=replica_id, advertise_url=advertise_url)
    settings.migrate = not no_migrate
    from service.replica import ReplicaIdError, resolve_identity
    try:
        resolve_identity(settings)
    except ReplicaIdError as exc:
        fail(f"error: {exc}")
    if settings.signing_key:
        from service.app.checkpoints import KeyFileError, Signer
        try:
            Signer.from_file(settings.signing_key)
        except KeyFileError as exc:
            fail(f"error: {exc}")
    try:
        api_settings = ApiSettings.from_tokens_file(settings.tokens_file, replica_id=settings.replica_id or "",
                                                    advertise_url=settings.advertise_url or "")
    except TokenFileError as exc:  # its message never holds a token
        fail(f"error: {exc}")
    db(settings.database_url)  # an SQLite file's directory must exist
    _check_replica_settings(settings, api_settings)
    bind = _loopback_only(resolve_bind_host(api_settings, settings.host), settings.host)
    sock = _listen(bind, settings.port)  # before anything starts: a port in use is one error, nothing logged
    application = build_app(settings, api_settings)
    url = _url(bind, sock.getsockname()[1])

    def announce() -> None:  # after the startup hooks (migrations, Kafka): the API answers now
        out.print(f"listening on {url} — API docs at /schema — console at {url}/ui", markup=False, highlight=False,
                  soft_wrap=True)

    application.on_startup.append(announce)
    # no proxy-header rewriting (nothing here reads client addresses): one middleware less per request;
    # log_config None: uvicorn's own lines go through the JSON logging configured above
    config = uvicorn.Config(application, host=bind, port=settings.port, log_level="warning", access_log=False,
                            proxy_headers=False, server_header=False, log_config=None)
    _server(config, application).run(sockets=[sock])
    from service.bootstrap import EXIT_KEY
    if (message := application.state.get(EXIT_KEY)) is not None:  # e.g. the replica id is held by a live one
        fail(message)


def _check_replica_settings(settings: Settings, api_settings: ApiSettings) -> None:
    """docs/replicas.md: the lease within bounds; on PostgreSQL with tokens and Kafka, a peer token."""
    if not 500 <= settings.replica_lease_ms <= 60_000:
        fail(f"error: GANGPLANK_REPLICA_LEASE_MS={settings.replica_lease_ms}: must be from 500 to 60000")
    if settings.database_url.startswith("postgresql") and settings.kafka_bootstrap and not api_settings.is_open \
            and not settings.peer_token:
        fail("error: replicas with tokens and Kafka need GANGPLANK_PEER_TOKEN (a token of the replica role)")


def _server(config: Any, application: Any) -> Any:
    """uvicorn's server, except that SIGTERM first hands the replica's clusters over while the API still
    answers (docs/replicas.md, *Leaving*), then stops as uvicorn does."""
    import uvicorn

    from service.api.replicas_routes import OWNERSHIP_KEY

    ownership = application.state.get(OWNERSHIP_KEY)

    class Server(uvicorn.Server):
        leaving: Any = None

        def handle_exit(self, sig: int, frame: Any) -> None:
            if ownership is None or self.leaving is not None or self.should_exit:
                super().handle_exit(sig, frame)
                return
            loop = asyncio.get_event_loop()

            def leave() -> None:
                self.leaving = loop.create_task(ownership.leave())
                self.leaving.add_done_callback(lambda _: super(Server, self).handle_exit(sig, frame))
            loop.call_soon_threadsafe(leave)

    return Server(config)


def _loopback_only(bind: str, host: str) -> str:
    """The host to bind; an open API asked for another host says so on stdout beside the listening
    line, not only in the log."""
    if bind != host:
        out.print(f"warning: no access tokens (--tokens FILE): the API is open to anyone who reaches it, so it "
                  f"listens on {bind} only, not on {host}", markup=False, highlight=False, soft_wrap=True)
    return bind


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (as uvicorn binds one), or one line and exit 2."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        fail(f"error: cannot listen on {_url(host, port)}: {reason}")
    sock.set_inheritable(True)
    return sock


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@friendly
def migrate(database_url: str | None = DbOpt) -> None:
    """Bring the schema to the latest migration."""
    from service.bootstrap import migrate as upgrade

    url = db(database_url)
    asyncio.run(upgrade(url))
    console.print("[green]schema is at the latest migration[/]")


@friendly
def keygen(out_file: str = typer.Option(..., "--out", metavar="FILE",
                                        help="Where to write the private key (FILE) and the public key (FILE.pub)."),
           force: bool = typer.Option(False, "--force", help="Replace an existing key pair (the checkpoints its "
                                                             "key signed then verify with the old public key only).")
           ) -> None:
    """Write a new Ed25519 key pair for signed checkpoints (serve --signing-key FILE, verify --public-key FILE.pub);
    an existing FILE or FILE.pub is never replaced without --force."""
    from service.app.checkpoints import KeyExists
    from service.app.checkpoints import keygen as make_keys

    try:
        key_id = make_keys(out_file, force=force)
    except KeyExists as exc:
        fail(f"error: {exc}")
    console.print(f"wrote {out_file} (private: keep it away from the database) and {out_file}.pub; "
                  f"key id {key_id}", markup=False, highlight=False, soft_wrap=True)

