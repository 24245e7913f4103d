"""`fecbench dask certs`: a campaign CA and one certificate per host, and the command lines that use them.

The CA's private key signs the host certificates and stays where it was made (never copy it to a
worker). Each host gets its own certificate and key; Dask's TLS is mutual, so the scheduler, every
worker and the coordinator present a certificate from this CA, and nothing else is let in.
Keys are written with mode 0600, the folder with 0700.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path

from fecbench.inputs.errors import UserError

HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.\-]{0,252})$|^[0-9a-fA-F:]+$")
COORDINATOR = "coordinator"


@dataclass
class HostFiles:
    name: str
    cert: Path
    key: Path


def _check_host(text: str, option: str) -> str:
    if not HOST_RE.match(text):
        raise UserError(f"{option} {text!r}: expected a host name or IP address (letters, digits, '.', '-', ':')")
    return text


def _san(host: str):  # noqa: ANN202 - a cryptography GeneralName
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600)


def make(out: Path, scheduler: str, workers: list[str], days: int = 365) -> dict[str, HostFiles]:
    """Write ca.pem, ca.key and <host>.pem/<host>.key for the scheduler, each worker and the coordinator."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    _check_host(scheduler, "--scheduler")
    for worker in workers:
        _check_host(worker, "--worker")
    if not workers:
        raise UserError("--worker: give at least one worker host (repeat --worker for each)")
    if not 1 <= days <= 3650:
        raise UserError(f"--days {days}: expected 1 to 3650")
    names = [scheduler, *workers, COORDINATOR]
    if len(set(names)) != len(names):
        raise UserError(f"hosts must be distinct (and not named {COORDINATOR!r}): {', '.join(names)}")
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out}: the folder is not empty; choose a new folder (existing keys are never overwritten)")
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)

    now = datetime.datetime.now(datetime.timezone.utc)
    valid_until = now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    # A name of its own: two campaign CAs trusted side by side must not be confused by name lookups.
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"fecbench campaign CA {secrets.token_hex(6)}")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now).not_valid_after(valid_until)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (out / "ca.pem").write_bytes(ca_cert.public_bytes(pem))
    _write_private(out / "ca.key", ca_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    files: dict[str, HostFiles] = {}
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                   .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(valid_until)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
        if name != COORDINATOR:
            builder = builder.add_extension(x509.SubjectAlternativeName([_san(name)]), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        host = HostFiles(name=name, cert=out / f"{name}.pem", key=out / f"{name}.key")
        host.cert.write_bytes(cert.public_bytes(pem))
        _write_private(host.key, key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
        files[name] = host
    return files


def recipe(out: Path, scheduler: str, workers: list[str], port: int, design: str = "designs/smoke.toml",
           remote_dir: str = "/etc/fecbench/tls") -> str:
    """The exact commands, host by host, that run a campaign over TLS with the files `make` wrote."""
    q = shlex.quote
    host = f"[{scheduler}]" if ":" in scheduler else scheduler
    address = f"tls://{host}:{port}"

    def tls(name: str) -> str:
        return (f"--tls-ca-file {q(remote_dir + '/ca.pem')} --tls-cert {q(f'{remote_dir}/{name}.pem')} "
                f"--tls-key {q(f'{remote_dir}/{name}.key')}")

    files = " ".join(q(str(out / name)) for name in ("ca.pem", f"{scheduler}.pem", f"{scheduler}.key",
                                                       f"{COORDINATOR}.pem", f"{COORDINATOR}.key"))
    lines = [f"# Files are in {out}. ca.key signs certificates: keep it there, copy it nowhere.",
             "# Each host gets ca.pem, <host>.pem and <host>.key in " + remote_dir + " (mode 0700, owned by root);",
             "# on the scheduler and coordinator (here, if that is this host):",
             f"install -d -m 700 {q(remote_dir)}",
             f"install -m 600 {files} {q(remote_dir)}/",
             "# to each worker, e.g. by SSH (the folder first: scp does not make it):"]
    for worker in workers:
        lines += [f"ssh root@{q(worker)} install -d -m 700 {q(remote_dir)}",
                  f"scp -q {q(str(out / 'ca.pem'))} {q(str(out / f'{worker}.pem'))} {q(str(out / f'{worker}.key'))} "
                  f"root@{q(worker) if ':' not in worker else '[' + worker + ']'}:{q(remote_dir)}/"]
    lines += ["",
             f"# on {scheduler} (the scheduler; --host binds the interface the workers reach; its HTTP",
             "# diagnostics stay on loopback: reach them with an SSH tunnel if you need them):",
             f".venv/bin/dask scheduler --host {q(scheduler)} --port {port} --no-dashboard "
             f"--dashboard-address 127.0.0.1:8787 {tls(scheduler)}"]
    for worker in workers:
        lines += ["", f"# on {worker}, AS ROOT, in a checkout built by `make bootstrap` (same commit):",
                  f".venv/bin/dask worker {address} --host {q(worker)} --nworkers 1 --nthreads 1 --no-dashboard "
                  f"--dashboard-address 127.0.0.1:0 {tls(worker)}"]
    lines += ["", "# on the coordinator (it alone writes the results database):",
              f".venv/bin/fecbench run {q(design)} --dask {address} {tls(COORDINATOR)}"]
    return "\n".join(lines)
