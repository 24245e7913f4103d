"""Who may talk to a campaign's Dask cluster: credentials, the address policy, and the endpoint probe.

Dask workers run as root and execute whatever their scheduler hands them, so every port a campaign
uses must demand the campaign's credentials:

- `local:N`: the coordinator makes in-memory credentials for this campaign alone
  (`Security.temporary()`: one self-signed certificate, never written to disk by fecbench) and the
  local cluster speaks mutual TLS on 127.0.0.1 with them; no dashboard unless asked for, then on
  127.0.0.1 only.
- `tls://HOST:PORT`: a cluster started with certificates from a campaign CA (`fecbench dask certs`
  makes them); the coordinator's own certificate, key and the CA come from `--tls-*` options or from
  Dask's standard configuration (`distributed.comm.tls.*`).
- `tcp://HOST:PORT`: no authentication at all. Refused unless HOST is a loopback address or
  `--insecure` is given; either way the campaign records that it ran unauthenticated.

Dask's TLS is mutual (both ends present a certificate signed by the CA the other trusts), so a client
without a certificate from the campaign's CA cannot complete a handshake with the scheduler, a worker
or a nanny. On top of that, each worker reports the certificate it holds and the coordinator checks
that the campaign's CA issued it (`check_worker_certificate`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import socket
import ssl
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fecbench.inputs.errors import UserError

if TYPE_CHECKING:
    from cryptography import x509
    from distributed import Security

PROBE_TIMEOUT_S = 5.0
GREETING_MAX_BYTES = 1 << 16   # a Dask greeting (its handshake info) is a few hundred bytes
TLS_HINT = ("make a campaign CA and certificates with `fecbench dask certs DIR --scheduler HOST --worker HOST`, "
            "start the cluster with the command lines it prints and pass --tls-ca-file, --tls-cert and "
            "--tls-key to `fecbench run`")


@dataclass
class TlsFiles:
    """The coordinator's credentials for a tls:// cluster, as given on the command line (any may be None)."""

    ca_file: Path | None = None
    cert: Path | None = None
    key: Path | None = None

    def given(self) -> bool:
        return any(v is not None for v in (self.ca_file, self.cert, self.key))


@dataclass
class CampaignSecurity:
    """What protects a campaign's cluster: the Dask `Security` to use and how it is recorded."""

    security: Security | None      # None: plain TCP
    record: dict[str, Any] = field(default_factory=dict)   # goes into campaigns.host_json["dask_security"]
    ca_pem: str | None = None      # the CA every worker certificate must come from (None: plain TCP)

    @property
    def authenticated(self) -> bool:
        return self.ca_pem is not None


# --- the address policy ----------------------------------------------------------------------------

def split_address(address: str) -> tuple[str, str, int]:
    """`tls://host:port` -> ("tls", "host", port); IPv6 literals in brackets."""
    scheme, rest = address.split("://", 1)
    host, _, port = rest.rpartition(":")
    return scheme, host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    """Literal loopback addresses and `localhost` only: a name is not resolved (it could point anywhere)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_policy(address: str, insecure: bool, tls: TlsFiles) -> None:
    """Refuse what would let others in, before anything starts (UserError = exit 2)."""
    scheme, host, port = split_address(address)
    if not 1 <= port <= 65535:
        raise UserError(f"--dask {address}: port {port} is out of range (1-65535)")
    if scheme == "tcp":
        if tls.given():
            raise UserError(f"--dask {address}: --tls-* options need a tls:// address (tls://{host}:{port})")
        if not is_loopback(host) and not insecure:
            raise UserError(
                f"--dask {address}: plain tcp:// to a non-loopback host is refused: anyone who reaches that "
                "port can run code as root on every worker. Use TLS: " + TLS_HINT + ". To run unauthenticated "
                "anyway (a closed lab network), add --insecure; the campaign records it.")


# --- credentials ------------------------------------------------------------------------------------

def _read(path: Path, what: str, option: str) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot read the {what}: {exc.strerror}") from None


def _pem_certificate(text: str, where: str) -> x509.Certificate:
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificate(text.encode())
    except ValueError:
        raise UserError(f"{where}: not a PEM certificate") from None


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """True if `ca` signed `cert` (RSA or EC signatures); works with cryptography ≥ 38."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

    if cert.issuer != ca.subject:
        return False
    key = ca.public_key()
    try:
        if isinstance(key, rsa.RSAPublicKey):
            key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        else:
            return False
    except InvalidSignature:
        return False
    return True


def fingerprint(pem: str) -> str:
    """sha256 of a certificate's DER bytes (what the database records to name a CA)."""
    from cryptography.hazmat.primitives.serialization import Encoding

    return hashlib.sha256(_pem_certificate(pem, "certificate").public_bytes(Encoding.DER)).hexdigest()


def for_local_cluster() -> CampaignSecurity:
    """In-memory credentials that exist for this campaign only."""
    from distributed import Security

    security = Security.temporary()
    ca = security.tls_ca_file  # the PEM text itself, not a path
    return CampaignSecurity(security=security, ca_pem=ca,
                            record={"transport": "tls", "authenticated": True,
                                    "credentials": "temporary, in memory, this campaign only",
                                    "ca_sha256": fingerprint(ca)})


def for_address(address: str, insecure: bool, tls: TlsFiles) -> CampaignSecurity:
    """The coordinator's credentials for a scheduler address (after `check_policy`)."""
    scheme, host, _ = split_address(address)
    if scheme == "tcp":
        return CampaignSecurity(security=None, record={
            "transport": "tcp", "authenticated": False, "insecure": insecure,
            "why": "--insecure given" if insecure else "loopback scheduler started by the user"})
    import dask
    from distributed import Security

    ca_file = tls.ca_file or dask.config.get("distributed.comm.tls.ca-file", None)
    cert = tls.cert or dask.config.get("distributed.comm.tls.client.cert", None)
    key = tls.key or dask.config.get("distributed.comm.tls.client.key", None)
    missing = [name for name, value in (("--tls-ca-file", ca_file), ("--tls-cert", cert)) if not value]
    if missing:
        raise UserError(f"--dask {address}: a tls:// cluster needs the campaign CA and this host's certificate and key "
                        f"(missing: {', '.join(missing)}; or set distributed.comm.tls.ca-file and "
                        f"distributed.comm.tls.client.cert/key in the Dask configuration). {TLS_HINT}")
    ca_pem = _read(Path(ca_file), "CA certificate", "--tls-ca-file")
    cert_pem = _read(Path(cert), "certificate", "--tls-cert")
    key_path = Path(key) if key else None
    if key_path is not None:
        _read(key_path, "private key", "--tls-key")
    ca_cert = _pem_certificate(ca_pem, f"--tls-ca-file {ca_file}")
    if not issued_by(_pem_certificate(cert_pem, f"--tls-cert {cert}"), ca_cert):
        raise UserError(f"--tls-cert {cert}: this certificate was not issued by the CA in --tls-ca-file {ca_file}")
    security = Security(tls_ca_file=str(ca_file), tls_client_cert=str(cert),
                        tls_client_key=str(key_path) if key_path else None, require_encryption=True)
    try:
        security.get_connection_args("client")
    except (ssl.SSLError, OSError) as exc:
        raise UserError(f"--tls-cert {cert} / --tls-key {key}: cannot load them: {exc}") from None
    return CampaignSecurity(security=security, ca_pem=ca_pem, record={
        "transport": "tls", "authenticated": True, "credentials": f"files: CA {ca_file}, certificate {cert}",
        "ca_sha256": fingerprint(ca_pem), "host": host})


# --- workers: whose certificate do they hold? --------------------------------------------------------

def worker_credentials() -> dict[str, Any]:
    """(On a worker.) The CA it trusts and the certificate it presents, as PEM text (None: plain TCP)."""
    from distributed import get_worker

    security = get_worker().security

    def pem(value: str | None) -> str | None:
        if not value:
            return None
        return value if "\n" in value else Path(value).read_text()

    return {"encrypted": bool(security.require_encryption), "ca_pem": pem(security.tls_ca_file),
            "cert_pem": pem(security.tls_worker_cert)}


def check_worker_certificate(campaign: CampaignSecurity, creds: dict[str, Any]) -> str | None:
    """Why a worker may not take part (None: it may): its certificate must come from the campaign's CA."""
    if not campaign.authenticated:
        return None
    if not creds.get("cert_pem"):
        return "it presents no TLS certificate"
    ca = _pem_certificate(campaign.ca_pem or "", "campaign CA")
    try:
        cert = _pem_certificate(creds["cert_pem"], "worker certificate")
    except UserError:
        return "its certificate is not a PEM certificate"
    if not issued_by(cert, ca):
        return f"its certificate ({cert.subject.rfc4514_string()}) was not issued by the campaign's CA"
    return None


# --- is there a Dask scheduler at that address? ------------------------------------------------------

def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return data


def probe(address: str, campaign: CampaignSecurity, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Check, with bounded time and memory, that a Dask endpoint answers at `address` before Dask's own
    client connects (which trusts the first 8 bytes it reads as a frame length and waits without bound).
    A Dask listener greets first: an 8-byte length, then its handshake info (msgpack)."""
    scheme, host, port = split_address(address)
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise UserError(f"--dask {address}: cannot reach the Dask scheduler ({exc.strerror or exc}); start it "
                        "with `dask scheduler` and workers with `dask worker` (as root) on each host") from None
    with raw:
        sock: socket.socket = raw
        if scheme == "tls":
            context = campaign.security.get_connection_args("client")["ssl_context"]
            try:
                sock = context.wrap_socket(raw, server_hostname=None)
            except (ssl.SSLError, OSError) as exc:
                raise UserError(f"--dask {address}: the TLS handshake failed ({exc}): either no Dask scheduler "
                                "with TLS listens there, or it does not trust the campaign's CA") from None
        sock.settimeout(timeout)
        try:
            header = _recv_exactly(sock, 8)
        except TimeoutError:
            raise UserError(f"--dask {address}: something listens there but said nothing within {timeout:g} s; "
                            "a Dask scheduler greets at once: this is not one") from None
        except OSError as exc:
            raise UserError(f"--dask {address}: the connection failed ({exc}): not a Dask scheduler") from None
        if len(header) < 8:
            raise UserError(f"--dask {address}: the peer closed the connection at once: not a Dask scheduler"
                            + (" (a TLS scheduler needs a tls:// address)" if scheme == "tcp" and not header
                               else ""))
        (length,) = struct.unpack("Q", header)
        if length > GREETING_MAX_BYTES:
            shown = header + _recv_exactly_quietly(sock, 40)
            raise UserError(f"--dask {address}: the service there sent {shown[:48]!r}: not a Dask scheduler")
        try:
            greeting = _recv_exactly(sock, length)
        except OSError:
            greeting = b""
        if b"pickle-protocol" not in greeting:
            raise UserError(f"--dask {address}: the service there does not speak Dask's protocol "
                            f"(it sent {(header + greeting)[:48]!r})")


def _recv_exactly_quietly(sock: socket.socket, count: int) -> bytes:
    try:
        return sock.recv(count)
    except OSError:
        return b""
