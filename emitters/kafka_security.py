"""Kafka client security (TLS, SASL) for every runwatch role: one settings object.

Platform teams run a secured Kafka; every client runwatch makes (the emitters' kafka-python
producer, the worker's aiokafka consumers and Faust app, the sink, the notifier, `alerts`,
`simulate`) takes its security from a `KafkaSecurity`, built from the environment
(`RUNWATCH_KAFKA_*`, which is how the Helm chart passes it) or from the shared CLI flags, and
translated here for kafka-python and aiokafka (and in `runwatch.stream.kafka.clients` for Faust).

Standard library only: the emitter package imports it. The password is kept out of `repr`,
logs and error messages; it can come from a file (`RUNWATCH_KAFKA_SASL_PASSWORD_FILE`, the
CLI's `--kafka-sasl-password-file`), never from a command-line value. Bad settings fail at
construction with one line (`KafkaSecurityError`, a ValueError).
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runwatch.emitters import env
from runwatch.emitters.exceptions import KafkaSecurityError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


#: Secrets blanked out of every log record of this process, in plain and in bytes-repr form.
_REDACT: set[str] = set()
_REDACT_LOCK = threading.Lock()


def _redact_in_logs(secret: str) -> None:
    """Blank `secret` out of every log record from now on. Client libraries log whole
    requests at DEBUG (aiokafka and kafka-python both), SASL PLAIN's password included; so
    once a password is handed to a client, a record factory scrubs it. Records are only
    made for enabled levels, so this costs nothing where DEBUG is off."""
    with _REDACT_LOCK:
        if secret in _REDACT:
            return
        first = not _REDACT
        _REDACT.update({secret, repr(secret.encode())[2:-1]})
        if not first:
            return
        make = logging.getLogRecordFactory()

        def scrubbing(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = make(*args, **kwargs)
            try:
                text = record.getMessage()
            except Exception:  # a broken record: logging reports it as it would
                return record
            if any(s in text for s in _REDACT):
                for s in sorted(_REDACT, key=len, reverse=True):
                    text = text.replace(s, "***")
                record.msg, record.args = text, None
            return record

        logging.setLogRecordFactory(scrubbing)


def _readable(label: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as err:
        raise KafkaSecurityError(f"{label} {path} not readable ({err.strerror})") from None


def read_password_file(path: str) -> str:
    """The password in `path`, without the trailing newline editors and Secrets add."""
    _readable("SASL password file", path)
    with open(path, encoding="utf-8") as f:
        password = f.read().rstrip("\r\n")
    if not password:
        raise KafkaSecurityError(f"SASL password file {path} is empty")
    return password


@dataclass(frozen=True)
class KafkaSecurity:
    """How to reach a Kafka: protocol, SASL credentials, TLS files. Validated when made."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    check_hostname: bool = True

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise in place once
        set_(self, "protocol", str(self.protocol).strip().upper())
        set_(self, "mechanism", str(self.mechanism).strip().upper())
        self._validate()

    # --- validation --------------------------------------------------------------------------

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def _validate(self) -> None:
        p = self.protocol
        if p not in PROTOCOLS:
            raise KafkaSecurityError(
                f"security protocol {p!r} is not one of {', '.join(PROTOCOLS)}"
            )
        if self.sasl:
            if self.mechanism not in MECHANISMS:
                raise KafkaSecurityError(
                    f"SASL mechanism {self.mechanism!r} is not one of {', '.join(MECHANISMS)}"
                )
            if not self.username:
                raise KafkaSecurityError(
                    f"{p} needs a SASL username (--kafka-sasl-username or {env.KAFKA_USERNAME})"
                )
            if not self.password:
                raise KafkaSecurityError(
                    f"{p} needs a SASL password (--kafka-sasl-password-file, "
                    f"{env.KAFKA_PASSWORD_FILE} or {env.KAFKA_PASSWORD})"
                )
        elif self.username or self.password:
            raise KafkaSecurityError(
                f"a SASL username or password is set but the security protocol is {p}: "
                "use SASL_SSL or SASL_PLAINTEXT"
            )
        files = [("CA file", self.cafile), ("client certificate", self.certfile),
                 ("client key", self.keyfile)]  # fmt: skip
        if not self.tls:
            for label, path in files:
                if path:
                    raise KafkaSecurityError(
                        f"a {label} is set but the security protocol is {p}: use SSL or SASL_SSL"
                    )
            return
        if bool(self.certfile) != bool(self.keyfile):
            raise KafkaSecurityError(
                "a client certificate needs its key, and a key its certificate "
                "(--kafka-ssl-certfile and --kafka-ssl-keyfile, for mutual TLS)"
            )
        for label, path in files:
            if path:
                _readable(label, path)
        self.ssl_context()  # unreadable PEM fails now, not at the first connection

    # --- building ----------------------------------------------------------------------------

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        protocol: str | None = None,
        mechanism: str | None = None,
        username: str | None = None,
        password_file: str | None = None,
        cafile: str | None = None,
        certfile: str | None = None,
        keyfile: str | None = None,
        check_hostname: bool | None = None,
    ) -> KafkaSecurity:
        """The settings in `environ` (default os.environ); arguments that are not None win
        (the CLI flags). The password comes from `password_file`, else the file named by
        RUNWATCH_KAFKA_SASL_PASSWORD_FILE, else RUNWATCH_KAFKA_SASL_PASSWORD."""
        given = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            return given.get(name, "").strip() or None

        if check_hostname is None:
            raw = (get(env.KAFKA_CHECK_HOSTNAME) or "true").lower()
            if raw not in _TRUE + _FALSE:
                raise KafkaSecurityError(
                    f"{env.KAFKA_CHECK_HOSTNAME} must be true or false, not {raw!r}"
                )
            check_hostname = raw in _TRUE
        password_file = password_file or get(env.KAFKA_PASSWORD_FILE)
        password = (
            read_password_file(password_file) if password_file else given.get(env.KAFKA_PASSWORD)
        )
        return cls(
            protocol=protocol or get(env.KAFKA_PROTOCOL) or "PLAINTEXT",
            mechanism=mechanism or get(env.KAFKA_MECHANISM) or "PLAIN",
            username=username or get(env.KAFKA_USERNAME),
            password=password or None,
            cafile=cafile or get(env.KAFKA_CAFILE),
            certfile=certfile or get(env.KAFKA_CERTFILE),
            keyfile=keyfile or get(env.KAFKA_KEYFILE),
            check_hostname=check_hostname,
        )

    def describe(self) -> str:
        """A line for logs: everything but the password."""
        parts = [self.protocol]
        if self.sasl:
            parts.append(f"{self.mechanism} as {self.username}")
        if self.tls:
            parts.append(f"CA {self.cafile or 'system'}")
            if self.certfile:
                parts.append(f"client certificate {self.certfile}")
            if not self.check_hostname:
                parts.append("hostname not checked")
        return ", ".join(parts)

    def scrub(self, text: str) -> str:
        """`text` with the password, should a library have put it there, blanked out."""
        return text.replace(self.password, "***") if self.password else text

    # --- translators: one per client library -------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context (None without TLS): our CA (else the system's), the client
        certificate for mutual TLS, hostname checking unless turned off."""
        if not self.tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.cafile)
            context.check_hostname = self.check_hostname
            if self.certfile:
                context.load_cert_chain(self.certfile, self.keyfile)
        except (ssl.SSLError, OSError) as err:
            files = ", ".join(f for f in (self.cafile, self.certfile, self.keyfile) if f)
            reason = getattr(err, "reason", None) or err.__class__.__name__
            raise KafkaSecurityError(f"TLS files {files} do not load as PEM ({reason})") from None
        return context

    def client_password(self) -> str | None:
        """The password, for a client library: from now on log records never show it."""
        if self.password:
            _redact_in_logs(self.password)
        return self.password

    def aiokafka(self) -> dict[str, Any]:
        """Keyword arguments for aiokafka's consumers, producers and admin client."""
        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            out.update(
                sasl_mechanism=self.mechanism,
                sasl_plain_username=self.username,
                sasl_plain_password=self.client_password(),
            )
        if self.tls:
            out["ssl_context"] = self.ssl_context()
        return out

    def kafka_python(self) -> dict[str, Any]:
        """Keyword arguments for kafka-python's KafkaProducer / KafkaConsumer (the same
        names as aiokafka's; kafka-python takes the ready-made context as well)."""
        return self.aiokafka()


PLAINTEXT = KafkaSecurity()
