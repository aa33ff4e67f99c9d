"""`KafkaSecurity`: settings from the environment and flags, one-line validation, the
translators for kafka-python, aiokafka and Faust, and the password kept out of sight."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest

from runwatch import cli
from runwatch.dev.tls import make_certificates
from runwatch.emitters import Emitter
from runwatch.emitters.exceptions import KafkaSecurityError
from runwatch.emitters.kafka_security import KafkaSecurity
from runwatch.stream.kafka.clients import faust_credentials

SECRET = "s3cr3t-Pa55word-never-shown"


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.pem, client.pem and client.key, made by openssl."""
    folder = tmp_path_factory.mktemp("pem")
    make_certificates(folder)
    return folder


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "password"
    path.write_text(SECRET + "\n")
    return path


def env(pem: Path, **more: str) -> dict[str, str]:
    base = {
        "RUNWATCH_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
        "RUNWATCH_KAFKA_SASL_MECHANISM": "scram-sha-512",
        "RUNWATCH_KAFKA_SASL_USERNAME": "alice",
        "RUNWATCH_KAFKA_SASL_PASSWORD": SECRET,
        "RUNWATCH_KAFKA_SSL_CAFILE": str(pem / "ca.pem"),
    }
    return {**base, **more}


def test_nothing_set_is_plaintext() -> None:
    security = KafkaSecurity.from_env({})
    assert security == KafkaSecurity()
    assert security.kafka_python() == {"security_protocol": "PLAINTEXT"}
    assert security.aiokafka() == {"security_protocol": "PLAINTEXT"}
    assert security.ssl_context() is None
    assert faust_credentials(security) is None


def test_every_setting_comes_from_the_environment(pem: Path) -> None:
    security = KafkaSecurity.from_env(
        env(
            pem,
            RUNWATCH_KAFKA_SSL_CERTFILE=str(pem / "client.pem"),
            RUNWATCH_KAFKA_SSL_KEYFILE=str(pem / "client.key"),
            RUNWATCH_KAFKA_SSL_CHECK_HOSTNAME="false",
        )
    )
    assert (security.protocol, security.mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (security.username, security.password) == ("alice", SECRET)
    assert security.cafile == str(pem / "ca.pem")
    assert security.certfile == str(pem / "client.pem")
    assert security.keyfile == str(pem / "client.key")
    assert security.check_hostname is False


def test_the_password_file_wins_and_loses_its_newline(pem: Path, password_file: Path) -> None:
    environ = env(pem, RUNWATCH_KAFKA_SASL_PASSWORD="other",
                  RUNWATCH_KAFKA_SASL_PASSWORD_FILE=str(password_file))  # fmt: skip
    assert KafkaSecurity.from_env(environ).password == SECRET


def test_flags_win_over_the_environment(pem: Path, tmp_path: Path) -> None:
    flag_file = tmp_path / "flag-password"
    flag_file.write_text("from-the-flag")
    security = KafkaSecurity.from_env(
        env(pem, RUNWATCH_KAFKA_SSL_CAFILE=""), protocol="SASL_PLAINTEXT", mechanism="PLAIN",
        username="bob", password_file=str(flag_file),
    )  # fmt: skip
    assert (security.protocol, security.mechanism, security.username) == (
        "SASL_PLAINTEXT", "PLAIN", "bob",
    )  # fmt: skip
    assert security.password == "from-the-flag"
    assert security.cafile is None
    ca = KafkaSecurity.from_env(env(pem), cafile=str(pem / "client.pem"))
    assert ca.cafile == str(pem / "client.pem")
    assert KafkaSecurity.from_env(env(pem), check_hostname=False).check_hostname is False


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"protocol": "TLS"}, "security protocol 'TLS' is not one of PLAINTEXT, SSL, SASL_PL"),
        ({"protocol": "SASL_SSL", "mechanism": "GSSAPI", "username": "a", "password": "p"},
         "SASL mechanism 'GSSAPI' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"protocol": "SASL_SSL", "password": "p"}, "SASL_SSL needs a SASL username"),
        ({"protocol": "SASL_PLAINTEXT", "username": "a"}, "SASL_PLAINTEXT needs a SASL password"),
        ({"username": "a", "password": "p"}, "the security protocol is PLAINTEXT: use SASL_SSL"),
        ({"protocol": "SSL", "cafile": "/nonexistent/ca.pem"},
         "CA file /nonexistent/ca.pem not readable (No such file or directory)"),
        ({"protocol": "SASL_PLAINTEXT", "username": "a", "password": "p", "cafile": "/x"},
         "a CA file is set but the security protocol is SASL_PLAINTEXT"),
        ({"protocol": "SSL", "certfile": "/c.pem"}, "a client certificate needs its key"),
        ({"protocol": "SSL", "keyfile": "/c.key"}, "a client certificate needs its key"),
    ],
)  # fmt: skip
def test_bad_settings_fail_with_one_line(settings: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaSecurityError) as raised:
        KafkaSecurity(**settings)  # type: ignore[arg-type]
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert isinstance(raised.value, ValueError)  # the Emitter's "bad argument" error


def test_a_file_that_is_no_pem_fails_up_front(tmp_path: Path) -> None:
    junk = tmp_path / "ca.pem"
    junk.write_text("not a certificate")
    with pytest.raises(KafkaSecurityError, match=f"TLS files {junk} do not load as PEM"):
        KafkaSecurity("SSL", cafile=str(junk))


def test_bad_environment_values_name_the_variable(tmp_path: Path) -> None:
    with pytest.raises(KafkaSecurityError, match="RUNWATCH_KAFKA_SSL_CHECK_HOSTNAME must be"):
        KafkaSecurity.from_env({"RUNWATCH_KAFKA_SSL_CHECK_HOSTNAME": "maybe"})
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(KafkaSecurityError, match=f"SASL password file {empty} is empty"):
        KafkaSecurity.from_env({"RUNWATCH_KAFKA_SASL_PASSWORD_FILE": str(empty)})
    with pytest.raises(KafkaSecurityError, match="SASL password file /nope not readable"):
        KafkaSecurity.from_env({"RUNWATCH_KAFKA_SASL_PASSWORD_FILE": "/nope"})


def test_the_password_stays_out_of_repr_describe_and_errors(pem: Path) -> None:
    security = KafkaSecurity.from_env(env(pem))
    for text in (repr(security), str(security), security.describe()):
        assert SECRET not in text
    assert "SCRAM-SHA-512 as alice" in security.describe()
    assert security.scrub(f"oops {SECRET} leaked") == "oops *** leaked"
    with pytest.raises(KafkaSecurityError) as raised:
        KafkaSecurity.from_env(env(pem, RUNWATCH_KAFKA_SECURITY_PROTOCOL="PLAINTEXT"))
    assert SECRET not in str(raised.value)


def test_kafka_python_and_aiokafka_get_sasl_and_a_tls_context(pem: Path) -> None:
    security = KafkaSecurity.from_env(env(pem))
    for kwargs in (security.kafka_python(), security.aiokafka()):
        context = kwargs.pop("ssl_context")
        assert kwargs == {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice",
            "sasl_plain_password": SECRET,
        }
        assert isinstance(context, ssl.SSLContext)
        assert context.check_hostname is True
        assert context.verify_mode == ssl.CERT_REQUIRED


def test_the_translators_match_the_clients_own_settings(pem: Path) -> None:
    """Every key we hand over is one the client library takes (a typo would be a TypeError
    at connect time, or silently ignored)."""
    from kafka import KafkaConsumer, KafkaProducer

    security = KafkaSecurity.from_env(env(pem))
    assert set(security.kafka_python()) <= set(KafkaProducer.DEFAULT_CONFIG)
    assert set(security.kafka_python()) <= set(KafkaConsumer.DEFAULT_CONFIG)
    import inspect

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient

    for client in (AIOKafkaConsumer, AIOKafkaProducer, AIOKafkaAdminClient):
        assert set(security.aiokafka()) <= set(inspect.signature(client).parameters)


def test_mutual_tls_loads_the_client_certificate(pem: Path) -> None:
    security = KafkaSecurity(
        "SSL", cafile=str(pem / "ca.pem"), certfile=str(pem / "client.pem"),
        keyfile=str(pem / "client.key"), check_hostname=False,
    )  # fmt: skip
    kwargs = security.aiokafka()
    assert kwargs["security_protocol"] == "SSL"
    assert "sasl_mechanism" not in kwargs
    assert kwargs["ssl_context"].check_hostname is False


def test_faust_gets_sasl_credentials_that_reach_aiokafka(pem: Path) -> None:
    """faust-streaming 0.15 passes SASLCredentials' mechanism (SCRAM included) to aiokafka."""
    import faust
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

    scram = faust_credentials(KafkaSecurity.from_env(env(pem)))
    assert isinstance(scram, faust.SASLCredentials)
    auth = credentials_to_aiokafka_auth(scram)
    assert auth["security_protocol"] == "SASL_SSL"
    assert auth["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (auth["sasl_plain_username"], auth["sasl_plain_password"]) == ("alice", SECRET)
    assert isinstance(auth["ssl_context"], ssl.SSLContext)
    assert SECRET not in repr(scram)

    plain = faust_credentials(KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "bob", "pw"))
    auth = credentials_to_aiokafka_auth(plain)
    assert (auth["security_protocol"], auth["sasl_mechanism"]) == ("SASL_PLAINTEXT", "PLAIN")
    assert auth["ssl_context"] is None

    tls = faust_credentials(KafkaSecurity("SSL", cafile=str(pem / "ca.pem")))
    assert isinstance(tls, faust.SSLCredentials)
    assert credentials_to_aiokafka_auth(tls)["security_protocol"] == "SSL"


def test_the_emitter_reads_security_from_the_environment(
    pem: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env(pem, RUNWATCH_KAFKA_SECURITY_PROTOCOL="SASL_SSL",
                           RUNWATCH_KAFKA_SASL_MECHANISM="SCRAM-SHA-1").items():  # fmt: skip
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match="SASL mechanism 'SCRAM-SHA-1' is not one of"):
        Emitter(run="r", component="trainer", kafka="127.0.0.1:1", spool=tmp_path)
    # a spool destination has no Kafka to secure: the variables are not its business
    Emitter(run="r", component="trainer", path=tmp_path / "spool", heartbeat=False).close()


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = cli.main(argv)
    except SystemExit as done:  # argparse errors
        code = int(done.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("command", ["worker", "alerts", "notify", "sink", "simulate"])
def test_every_kafka_command_turns_bad_settings_into_exit_2(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = [command, "--kafka", "127.0.0.1:1", "--kafka-security-protocol", "SASL_SSL",
            "--kafka-sasl-mechanism", "NOPE", "--kafka-sasl-username", "a"]  # fmt: skip
    argv += {"sink": ["--db", str(tmp_path / "h.duckdb")], "simulate": ["--jobs", "1"]}.get(
        command, []
    )
    code, err = _run_cli(argv, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "SASL mechanism 'NOPE' is not one of" in lines[0]


def test_the_password_is_never_a_flag_value(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_cli(["alerts", "--kafka", "127.0.0.1:1", "--kafka-sasl-password", SECRET],
                         capsys)  # fmt: skip
    assert code == 2
    assert "--kafka-sasl-password-file" in err
    assert SECRET not in err


def test_a_password_handed_to_a_client_is_blanked_out_of_every_log_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """aiokafka and kafka-python log whole requests at DEBUG, SASL PLAIN's password included."""
    password = "an0ther-Pa55-for-PLAIN"
    security = KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "alice", password)
    caplog.set_level(logging.DEBUG)
    logging.getLogger("aiokafka.conn").debug("before: %r", password.encode())
    assert password in caplog.text  # nothing handed to a client yet: no scrubbing
    caplog.clear()
    assert security.aiokafka()["sasl_plain_password"] == password
    logging.getLogger("aiokafka.conn").debug("Request: %r", b"\x00alice\x00" + password.encode())
    logging.getLogger("kafka.net").debug("in a string: %s", password)
    assert password not in caplog.text
    assert caplog.text.count("***") == 2
