"""Secure serving of /metrics, as kube-scheduler's: HTTPS, and a bearer token checked by the API server.

* TLS: the certificate and key given (``--tls-cert-file`` / ``--tls-private-key-file``), else a
  self-signed pair generated in memory at start-up (kube-scheduler generates one too), valid for
  ``localhost``, ``127.0.0.1``, the host name and the bind address. TLS 1.2 at least.
* Authentication and authorisation are delegated to the API server
  (:class:`~shoal.kube.delegated_auth.DelegatedAuth`): no token → 401, a token whose user may not
  ``get`` the path → 403.
* ``/healthz``, ``/readyz`` and ``/livez`` are always allowed (kube-scheduler's
  ``--authorization-always-allow-paths``), so the kubelet's HTTPS probes need no token.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from aiohttp import web

from shoal.kube.delegated_auth import Decision

#: served to anyone, as kube-scheduler's --authorization-always-allow-paths default
ALWAYS_ALLOW_PATHS = frozenset({"/healthz", "/readyz", "/livez"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Checker(Protocol):
    async def check(self, token: str, path: str, verb: str) -> Decision: ...


def auth_middleware(
    checker: Checker, always_allow: frozenset[str] = ALWAYS_ALLOW_PATHS
) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """An aiohttp middleware: a request outside ``always_allow`` needs a bearer token whose user
    may ``<method> <path>`` (a non-resource request: the verb is the lower-case HTTP method)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in always_allow:
            return await handler(request)
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return web.Response(status=401, text="Unauthorized\n")
        decision = await checker.check(token, request.path, request.method.lower())
        if not decision.allowed:
            return web.Response(status=decision.status, text=decision.reason + "\n")
        return await handler(request)

    return middleware


def server_context(cert_file: str | None, key_file: str | None, *, host: str = "") -> ssl.SSLContext:
    """The TLS context of the secure port: the given pair, or a self-signed one."""
    if bool(cert_file) != bool(key_file):
        raise ValueError("--tls-cert-file and --tls-private-key-file go together")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file and key_file:
        ctx.load_cert_chain(cert_file, key_file)
        return ctx
    cert_pem, key_pem = self_signed(host)
    # ssl loads a chain only from files: written to a private directory and removed at once
    with tempfile.TemporaryDirectory(prefix="shoal-tls-") as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.write_bytes(cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def self_signed(host: str = "", *, days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed certificate and its key (PEM), for localhost, the host name and ``host``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    hostname = socket.gethostname()
    names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    if hostname and hostname != "localhost":
        names.append(x509.DNSName(hostname))
    try:
        address = ipaddress.ip_address(host)
        if not address.is_unspecified and str(address) != "127.0.0.1":
            names.append(x509.IPAddress(address))
    except ValueError:
        if host and host != "localhost":
            names.append(x509.DNSName(host))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{hostname or 'shoal'}@{os.getpid()}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
