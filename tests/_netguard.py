"""Refuse every outgoing connection that is not loopback or a unix socket.

The check runs before the real ``connect``, so a refused connection sends no packet.
Host names other than ``localhost`` are refused without being resolved.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_originals: dict[str, Any] = {}


def is_local(address: object) -> bool:
    if isinstance(address, str | bytes | bytearray):
        return True
    if not isinstance(address, tuple) or not address:
        return False
    host = address[0]
    if isinstance(host, bytes | bytearray):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower().rstrip(".") in _LOCAL_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _check(address: object) -> None:
    if not is_local(address):
        raise RuntimeError(f"tests must not reach the network: {address!r}")


def install() -> None:
    if _originals:
        return
    connect: Callable[..., Any] = socket.socket.connect
    connect_ex: Callable[..., Any] = socket.socket.connect_ex
    create_connection: Callable[..., Any] = socket.create_connection

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if self.family != socket.AF_UNIX:
            _check(address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        if self.family != socket.AF_UNIX:
            _check(address)
        result: int = connect_ex(self, address)
        return result

    def guarded_create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        _check(address)
        sock: socket.socket = create_connection(address, *args, **kwargs)
        return sock

    _originals.update(connect=connect, connect_ex=connect_ex, create_connection=create_connection)
    socket.socket.connect = guarded_connect  # type: ignore[method-assign, assignment]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign, assignment]
    socket.create_connection = guarded_create_connection


def uninstall() -> None:
    if not _originals:
        return
    socket.socket.connect = _originals["connect"]  # type: ignore[method-assign]
    socket.socket.connect_ex = _originals["connect_ex"]  # type: ignore[method-assign]
    socket.create_connection = _originals["create_connection"]
    _originals.clear()
