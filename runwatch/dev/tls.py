"""Secured listeners for the local test broker: a throwaway CA, TLS certificates and SASL users.

`runwatch kafka start --secure` and the integration tests' secured broker add three client
listeners, all on 127.0.0.1, next to the plaintext one (which stays for inter-broker traffic
and tests' own set-up) and the plaintext controller:

- `SASL_SSL`: TLS (server certificate for 127.0.0.1 / localhost, signed by our CA) + SASL
  SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN;
- `SASL_PLAINTEXT`: the same SASL mechanisms without TLS;
- `SSL`: mutual TLS, the client shows a certificate signed by our CA.

One user with a random password: its SCRAM credentials go into the metadata log when the
storage is formatted (`kafka-storage format --add-scram`), its PLAIN password into the
listeners' JAAS config. Certificates are made with the `openssl` CLI, keys unencrypted PEM
(Kafka reads PEM key stores: `ssl.keystore.type=PEM`). Everything lives in one folder that is
made once and reused, so a restarted dev broker keeps its addresses and credentials.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from runwatch.exceptions import SecureSetupError

USERNAME = "runwatch"
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
STATE = "listeners.json"
_DAYS = "30"
_SERVER_EXT = (
    "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
    "authorityKeyIdentifier=keyid,issuer\nsubjectKeyIdentifier=hash\n"
)
_CLIENT_EXT = (
    "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=clientAuth\nauthorityKeyIdentifier=keyid,issuer\n"
    "subjectKeyIdentifier=hash\n"
)


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise SecureSetupError("`openssl` is not on PATH: it makes the test certificates")
    done = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SecureSetupError(f"openssl {args[0]} failed: {done.stderr.strip()}")


def make_certificates(folder: Path) -> None:
    """ca.pem (+ ca.key), server.pem + server.key (127.0.0.1, localhost), server-keystore.pem
    (key and chain, for Kafka), client.pem + client.key (for mutual TLS)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "server.ext").write_text(_SERVER_EXT)
    (folder / "client.ext").write_text(_CLIENT_EXT)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-out", "ca.pem", "-days", _DAYS, "-subj", "/CN=runwatch test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)  # fmt: skip
    for name, subject in (("server", "/CN=localhost"), ("client", f"/CN={USERNAME}")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", "-subj", subject, cwd=folder)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", _DAYS,
                 "-extfile", f"{name}.ext", cwd=folder)  # fmt: skip
    keystore = (folder / "server.key").read_text() + (folder / "server.pem").read_text()
    (folder / "server-keystore.pem").write_text(keystore)
    for path in folder.glob("*.key"):
        path.chmod(0o600)


@dataclass(frozen=True)
class SecuredListeners:
    """The secured listeners' ports, files and credentials (kept in `folder/listeners.json`)."""

    folder: str
    sasl_ssl_port: int
    sasl_plaintext_port: int
    ssl_port: int
    username: str
    password: str

    def __repr__(self) -> str:  # the password stays out of logs and test reports
        return (
            f"SecuredListeners(sasl_ssl=127.0.0.1:{self.sasl_ssl_port}, "
            f"sasl_plaintext=127.0.0.1:{self.sasl_plaintext_port}, "
            f"ssl=127.0.0.1:{self.ssl_port}, username={self.username!r})"
        )

    @classmethod
    def prepare(cls, folder: Path, free_port: Callable[[], int]) -> SecuredListeners:
        """Reuse what `folder` holds (certificates, password, ports), else make it."""
        state = folder / STATE
        if state.is_file() and (folder / "server-keystore.pem").is_file():
            return cls(**json.loads(state.read_text()))
        make_certificates(folder)
        ports: set[int] = set()
        while len(ports) < 3:
            ports.add(free_port())
        a, b, c = sorted(ports)
        made = cls(str(folder), a, b, c, USERNAME, secrets.token_urlsafe(18))
        state.write_text(json.dumps(asdict(made), indent=2) + "\n")
        state.chmod(0o600)
        (folder / "password").write_text(made.password + "\n")
        (folder / "password").chmod(0o600)
        return made

    def path(self, name: str) -> str:
        return str(Path(self.folder) / name)

    @property
    def ca_file(self) -> str:
        return self.path("ca.pem")

    @property
    def password_file(self) -> str:
        return self.path("password")

    def address(self, protocol: str) -> str:
        """`127.0.0.1:PORT` of the listener for `SASL_SSL`, `SASL_PLAINTEXT` or `SSL`."""
        port = {"SASL_SSL": self.sasl_ssl_port, "SASL_PLAINTEXT": self.sasl_plaintext_port,
                "SSL": self.ssl_port}[protocol]  # fmt: skip
        return f"127.0.0.1:{port}"

    def properties(self, port: int, controller: int) -> str:
        """server.properties lines; they come after the plaintext ones and, later keys
        winning in a .properties file, replace its listener settings."""
        plain = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{self.username}="{self.password}";'
        )
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        lines = [
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},"
            f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port},"
            f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_plaintext_port},"
            f"SSL://127.0.0.1:{self.ssl_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port},"
            f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port},"
            f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_plaintext_port},"
            f"SSL://127.0.0.1:{self.ssl_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
            "SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
            f"sasl.enabled.mechanisms={','.join(MECHANISMS)}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={self.path('server-keystore.pem')}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.ca_file}",
            "listener.name.ssl.ssl.client.auth=required",
        ]
        for listener in ("sasl_ssl", "sasl_plaintext"):
            lines.append(f"listener.name.{listener}.plain.sasl.jaas.config={plain}")
            for mechanism in ("scram-sha-256", "scram-sha-512"):
                lines.append(f"listener.name.{listener}.{mechanism}.sasl.jaas.config={scram}")
        return "\n".join(lines) + "\n"

    def describe(self) -> str:
        """What a developer needs to connect, the password by its file only."""
        sasl = f"user {self.username}, password in {self.password_file}"
        return (
            f"SASL_SSL {self.address('SASL_SSL')} and SASL_PLAINTEXT "
            f"{self.address('SASL_PLAINTEXT')} ({'/'.join(MECHANISMS)}, {sasl}); "
            f"mutual TLS (SSL) {self.address('SSL')} (client.pem/client.key); "
            f"CA {self.ca_file}"
        )

    def format_args(self) -> list[str]:
        """`kafka-storage format` arguments that store the user's SCRAM credentials."""
        out: list[str] = []
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            out += ["--add-scram", f"{mechanism}=[name={self.username},password={self.password}]"]
        return out
