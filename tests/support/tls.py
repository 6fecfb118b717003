"""A real TLS endpoint in front of the real llama-server, with a certificate made for the test.

The pinned llama-server is built without OpenSSL, so a TLS-terminating relay (Python's ``ssl``,
one TCP connection to llama-server per client connection, bytes passed on untouched) stands
where a LAN server's TLS would. The certificate is signed by a CA made here (``cryptography``),
which no system trusts: a client trusts it only through ``LLAMA_CA_FILE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA's certificate: what LLAMA_CA_FILE names
    certificate: Path  # the server's chain
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_certificates(folder: Path) -> Certificates:
    """A CA and a server certificate it signs, for 127.0.0.1 and localhost, valid for a day."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("qwenweb test CA"))
        .issuer_name(_name("qwenweb test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # certificate and CRL signing
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name("llama-server"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = Certificates(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    paths.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths.certificate.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(64 * 1024):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


@contextlib.contextmanager
def tls_relay(target_url: str, certificates: Certificates) -> Iterator[str]:
    """``https://127.0.0.1:PORT`` for the block: each connection's bytes, decrypted, to ``target_url``'s server."""
    target = urlsplit(target_url)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates.certificate, certificates.key)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    port: list[int] = []

    async def relay(client_reader, client_writer) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(target.hostname, target.port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))

    async def serve() -> None:
        server = await asyncio.start_server(relay, "127.0.0.1", 0, ssl=context)
        port.append(server.sockets[0].getsockname()[1])
        started.set()
        async with server:
            await server.serve_forever()

    def run() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # how the block's end stops it
            loop.run_until_complete(serve())

    thread = threading.Thread(target=run, name="tls-relay", daemon=True)
    thread.start()
    assert started.wait(10), "the TLS relay did not start"
    try:
        yield f"https://127.0.0.1:{port[0]}"
    finally:
        loop.call_soon_threadsafe(lambda: [task.cancel() for task in asyncio.all_tasks()])
        thread.join(10)
        loop.close()
