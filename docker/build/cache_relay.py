"""Relay a Unix socket to a TCP compiler cache server (Redis), for a build container without a network.

Build containers run with ``--network none`` (the offline guarantee: a build cannot download
anything). ccache reaches its remote storage through a Unix socket instead (``redis+unix:``),
in a volume this relay shares with the build container; the relay itself runs in the engine
host's network and forwards every connection to HOST:PORT, byte for byte. It carries nothing
but the cache protocol to one address.

    python3 cache_relay.py SOCKET HOST PORT

Prints ``ORCH-RELAY ready`` once the server answered a connection and the socket listens, or
``ORCH-RELAY unreachable: REASON`` and exits 3.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys

CONNECT_TIMEOUT_S = 5.0
CHUNK = 1 << 16


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def _serve(path: str, host: str, port: int) -> None:
    async def connection(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), CONNECT_TIMEOUT_S
            )
        except (OSError, asyncio.TimeoutError) as error:
            print(f"ORCH-RELAY connection to {host}:{port} failed: {error}", flush=True)
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))

    if os.path.exists(path):
        os.unlink(path)
    server = await asyncio.start_unix_server(connection, path=path)
    # The build container may run as another user: anyone who can see the volume may connect.
    os.chmod(path, 0o777)
    print("ORCH-RELAY ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: cache_relay.py SOCKET HOST PORT", file=sys.stderr)
        return 2
    path, host, port = argv[0], argv[1], int(argv[2])
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        print(f"ORCH-RELAY unreachable: {error.strerror or error}", flush=True)
        return 3
    asyncio.run(_serve(path, host, port))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
