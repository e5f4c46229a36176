"""Certificates the tests make for their own TLS receivers (never a file in the tree)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa


def self_signed_for_loopback(key_path: Path) -> bytes:
    """A certificate for IP 127.0.0.1 (PEM), its key written to `key_path`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return certificate.public_bytes(serialization.Encoding.PEM)


class Authority:
    """A certificate authority of the test's own, issuing server and client certificates
    (mutual TLS): `ca_pem` is what a server trusts its clients by, or clients the server."""

    def __init__(self, name: str = "Homing Test CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.ca_pem = self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    def issue(
        self,
        common_name: str,
        *,
        server: bool = False,
        valid_days: float = 1,
        rsa_traditional: bool = False,
    ) -> tuple[str, str]:
        """(certificate PEM, private key PEM): a client certificate, or with `server` one
        for 127.0.0.1. A negative `valid_days` makes one that has already expired; an RSA
        key in its traditional form (`BEGIN RSA PRIVATE KEY`) with `rsa_traditional`."""
        key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
        if rsa_traditional:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            key_format = serialization.PrivateFormat.TraditionalOpenSSL
        else:
            key = ec.generate_private_key(ec.SECP256R1())
            key_format = serialization.PrivateFormat.PKCS8
        now = datetime.datetime.now(datetime.UTC)
        usage = (
            x509.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.ExtendedKeyUsageOID.CLIENT_AUTH
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=2))
            .not_valid_after(now + datetime.timedelta(days=valid_days))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
        certificate = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, key_format, serialization.NoEncryption()
        )
        return certificate.public_bytes(serialization.Encoding.PEM).decode(), key_pem.decode()

    def client_pem(self, common_name: str, **kwargs: Any) -> str:
        """A client certificate and its key in one string, as `tls_client_certificate` takes
        it (the certificate, then the key)."""
        certificate, key = self.issue(common_name, **kwargs)
        return certificate + key


def mtls_server_context(authority: Authority, folder: Path) -> ssl.SSLContext:
    """A server-side context for 127.0.0.1 that requires a client certificate issued by
    `authority`; `folder/ca.pem` holds the CA for clients to trust the server by."""
    certificate, key = authority.issue("127.0.0.1", server=True)
    (folder / "server.pem").write_text(certificate + key)
    (folder / "ca.pem").write_text(authority.ca_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "server.pem")
    context.load_verify_locations(cadata=authority.ca_pem)
    context.verify_mode = ssl.CERT_REQUIRED
    return context
