"""Loading a PEM string (certificate chain and private key) into an ssl.SSLContext.

`SSLContext.load_cert_chain` reads files only, so the PEM is written to a private (0600)
temporary file, loaded and removed at once: in memory (tmpfs) where the system has one,
so the key never reaches a disk. Shared by the check on save (webhooks) and the sender's
client certificates (deliveries/transport/client_tls.py), so a certificate the API
accepts is one OpenSSL loads.
"""

from __future__ import annotations

import os
import ssl
import tempfile

# mkstemp there is safe: O_EXCL, a random name, mode 0600.
_IN_MEMORY = "/dev/shm"  # noqa: S108


def load_pem_chain(context: ssl.SSLContext, pem: str) -> None:
    """Present `pem` (the certificate, its chain, then its key) from `context`; raises
    ssl.SSLError when OpenSSL refuses it (a key too small for its security level…)."""
    folder = _IN_MEMORY if os.path.isdir(_IN_MEMORY) and os.access(_IN_MEMORY, os.W_OK) else None
    descriptor, path = tempfile.mkstemp(prefix="homing-client-", suffix=".pem", dir=folder)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(pem)
        context.load_cert_chain(path)
    finally:
        os.unlink(path)
