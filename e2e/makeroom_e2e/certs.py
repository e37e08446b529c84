"""Loopback-only TLS material and service-account keys, made with the openssl command."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Credentials:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path
    token: str
    token_file: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_credentials(directory: Path) -> Credentials:
    """A CA, a serving certificate for 127.0.0.1/localhost, a service-account key pair, a token."""
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    _openssl("genrsa", "-out", "ca.key", "2048", cwd=d)
    _openssl(
        "req",
        "-x509",
        "-new",
        "-nodes",
        "-key",
        "ca.key",
        "-sha256",
        "-days",
        "3650",
        "-subj",
        "/CN=makeroom-e2e-ca",
        "-out",
        "ca.crt",
        cwd=d,
    )
    _openssl("genrsa", "-out", "apiserver.key", "2048", cwd=d)
    _openssl(
        "req",
        "-new",
        "-key",
        "apiserver.key",
        "-subj",
        "/CN=kube-apiserver",
        "-out",
        "apiserver.csr",
        cwd=d,
    )
    (d / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n",
        encoding="utf-8",
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        "apiserver.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "apiserver.crt",
        "-days",
        "3650",
        "-sha256",
        "-extfile",
        "san.ext",
        cwd=d,
    )
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    token = secrets.token_hex(24)
    token_file = d / "tokens.csv"
    token_file.write_text(f'{token},admin,admin-uid,"system:masters"\n', encoding="utf-8")
    token_file.chmod(0o600)
    return Credentials(
        ca_cert=d / "ca.crt",
        ca_key=d / "ca.key",
        serving_cert=d / "apiserver.crt",
        serving_key=d / "apiserver.key",
        sa_key=d / "sa.key",
        sa_pub=d / "sa.pub",
        token=token,
        token_file=token_file,
    )
