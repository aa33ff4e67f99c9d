"""The Kafka security flags every `--kafka` command shares, and the check each role makes
before it starts: one clear line when the broker cannot be reached, refuses the credentials or
fails the TLS handshake, instead of a client library's retries, hang or traceback. Also the
--health-port flags of the consuming roles (sink, notify).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from runwatch.emitters import env
from runwatch.emitters import kafka_security as ks
from runwatch.emitters.exceptions import KafkaSecurityError
from runwatch.emitters.kafka_security import KafkaSecurity
from runwatch.exceptions import CommandError
from runwatch.stream.kafka.connect import kafka_problem

GROUP_HELP = (
    "How to reach a secured Kafka. Each flag defaults to its environment variable (the Helm "
    "chart sets those); without any, the connection is PLAINTEXT. The SASL password is never "
    f"a flag value: give a file, or set {env.KAFKA_PASSWORD} / {env.KAFKA_PASSWORD_FILE}."
)


class _NoPasswordFlag(argparse.Action):
    """`--kafka-sasl-password VALUE` would put the password in `ps` and shell history (and,
    abbreviated, pass for --kafka-sasl-password-file): refuse it without echoing it."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.error(
            "--kafka-sasl-password is not accepted (a password on the command line leaks): "
            f"use --kafka-sasl-password-file FILE or set {env.KAFKA_PASSWORD}"
        )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535)")
    return port


def add_health_args(p: argparse.ArgumentParser, example: str) -> None:
    """--health-port/--health-host: /healthz, /readyz and /metrics of a consuming role."""
    p.add_argument(
        "--health-port",
        type=_port,
        metavar="PORT",
        help="serve /healthz (the loop turns), /readyz (partitions assigned and caught up) "
        f"and /metrics on this port (default: off; e.g. {example})",
    )
    p.add_argument("--health-host", default="0.0.0.0", metavar="HOST", help="(0.0.0.0)")


def add_kafka_security_args(parser: argparse.ArgumentParser) -> None:
    """Add the --kafka-security-protocol ... --kafka-ssl-no-check-hostname flags."""
    g = parser.add_argument_group("Kafka security (TLS/SASL)", GROUP_HELP)
    g.add_argument(
        "--kafka-security-protocol", metavar="PROTOCOL", type=str.upper,
        help=f"{' | '.join(ks.PROTOCOLS)} (default ${env.KAFKA_PROTOCOL}, else PLAINTEXT)",
    )  # fmt: skip
    g.add_argument(
        "--kafka-sasl-mechanism", metavar="MECHANISM", type=str.upper,
        help=f"{' | '.join(ks.MECHANISMS)} (default ${env.KAFKA_MECHANISM}, else PLAIN)",
    )  # fmt: skip
    g.add_argument(
        "--kafka-sasl-username", metavar="USER", help=f"SASL user (default ${env.KAFKA_USERNAME})"
    )
    g.add_argument(
        "--kafka-sasl-password-file", metavar="FILE",
        help=f"file holding the SASL password (default ${env.KAFKA_PASSWORD_FILE}, else "
        f"${env.KAFKA_PASSWORD})",
    )  # fmt: skip
    g.add_argument("--kafka-sasl-password", nargs="?", action=_NoPasswordFlag,
                   help=argparse.SUPPRESS)  # fmt: skip
    g.add_argument(
        "--kafka-ssl-cafile", metavar="PEM",
        help=f"CA certificate(s) that signed the brokers' (default ${env.KAFKA_CAFILE}, else the "
        "system's CAs)",
    )  # fmt: skip
    g.add_argument(
        "--kafka-ssl-certfile", metavar="PEM",
        help=f"client certificate, for mutual TLS (default ${env.KAFKA_CERTFILE})",
    )  # fmt: skip
    g.add_argument(
        "--kafka-ssl-keyfile", metavar="PEM",
        help=f"the client certificate's key (default ${env.KAFKA_KEYFILE})",
    )  # fmt: skip
    g.add_argument(
        "--kafka-ssl-no-check-hostname", action="store_true",
        help="do not check that a broker's certificate names its host (still checks the CA; "
        f"default: check, unless ${env.KAFKA_CHECK_HOSTNAME}=false)",
    )  # fmt: skip


def security_from_args(args: argparse.Namespace) -> KafkaSecurity:
    """The flags over the environment; raises KafkaSecurityError (one line)."""
    return KafkaSecurity.from_env(
        protocol=args.kafka_security_protocol,
        mechanism=args.kafka_sasl_mechanism,
        username=args.kafka_sasl_username,
        password_file=args.kafka_sasl_password_file,
        cafile=args.kafka_ssl_cafile,
        certfile=args.kafka_ssl_certfile,
        keyfile=args.kafka_ssl_keyfile,
        check_hostname=False if args.kafka_ssl_no_check_hostname else None,
    )


def kafka_security(args: argparse.Namespace) -> KafkaSecurity:
    """The settings; raises CommandError (exit 2) saying what is wrong with them."""
    try:
        return security_from_args(args)
    except KafkaSecurityError as err:
        raise CommandError(f"Kafka security: {err}") from None


# -- the check before a role starts ------------------------------------------------------------


def connect_check(args: argparse.Namespace, timeout: float = 10.0) -> KafkaSecurity:
    """What every role does before it starts: the security settings, once a broker at
    `--kafka` has accepted them. Raises CommandError with one line: exit 2 when the settings
    are wrong, 1 when no broker takes them."""
    quiet_transient_kafka_errors()
    security = kafka_security(args)
    if problem := kafka_problem(args.kafka, security, timeout):
        raise CommandError(problem, 1)
    return security


#: What the Kafka clients log at ERROR for states that pass by themselves: a topic the role
#: subscribes to before anything created it (the sink's runwatch.alerts before a worker runs),
#: a group coordinator still being elected on a fresh broker, and the offsets of a topic
#: just created, asked of a partition whose leader is still being elected (`alerts
#: --follow` started before the worker made runwatch.alerts). Message -> the errors that make
#: it transient (None: any).
_TRANSIENT: dict[str, tuple[str, ...] | None] = {
    "Topic %s not found in cluster metadata": None,
    "Group Coordinator Request failed: %s": ("CoordinatorNotAvailable",),
    "Failed fetch offsets from %s: %s": ("NotLeaderForPartition", "LeaderNotAvailable"),
}
_CLIENT_LOGGERS = (
    "aiokafka.cluster",
    "aiokafka.consumer.group_coordinator",
    "aiokafka.consumer.fetcher",
    "kafka.cluster",
    "kafka.coordinator.base",
)


def _not_transient(record: logging.LogRecord) -> bool:
    if record.msg not in _TRANSIENT:
        return True
    markers = _TRANSIENT[record.msg]
    if markers is not None and not any(m in str(record.args) for m in markers):
        return True
    record.levelno, record.levelname = logging.DEBUG, "DEBUG"  # kept for --log-level debug
    return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def quiet_transient_kafka_errors() -> None:
    """Say nothing of the clients' ERROR lines for states that pass by themselves (they
    alarm people on every first start); any other error still shows. Idempotent."""
    for name in _CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if _not_transient not in logger.filters:
            logger.addFilter(_not_transient)
