"""What a piece of work waits on, named alike by every emitter (contract section 8, `dep`).

A service is named from its endpoint -- `host:port`, no scheme, no path, no credentials --
with an optional role prefix: `service("https://pool-a.internal/run", "sandbox")` is
`sandbox@pool-a.internal:443`, `service("rm-1:8000", "reward")` is `reward@rm-1:8000`. Two
runs that reach one server by one endpoint name it the same, whichever emitter reports it,
so runwatch can see that the runs' stalls share it (fleet incidents). The rollout emitter,
the verl and TRL integrations all name services here; a user names one with it too.

A loopback host (`localhost`, any 127/8 address, `::1`, and `0.0.0.0`, which connects to
the machine itself) means a different server on every machine -- a reward server or sandbox
per node, or a sidecar per pod -- so it is named by the machine instead:
`reward@localhost:8000` on node-1 is `reward@node-1:8000`, the name a process elsewhere
would reach it by, and `localhost` and `127.0.0.1` on one machine name one server. The
machine is the one whose network namespace `localhost` is: the host name
(`runwatch.emitters.env.machine`), which on Kubernetes is the pod's even where
`RUNWATCH_NODE` makes `src.host` the node's.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from runwatch.emitters import env

#: the port a URL of this scheme means when it names none
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_ROLE = re.compile(r"[a-z][a-z0-9_-]{0,39}")
#: `dep`'s length bound (an identifier of the contract, section 1)
MAX_LENGTH = 200
#: host names that mean this machine (RFC 6761's `localhost`, and the names Linux
#: distributions' /etc/hosts give the loopback address)
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def is_loopback(host: str) -> bool:
    """Whether `host` (a lower-cased name or address, without brackets) reaches the machine
    it is used on: a name of localhost (`*.localhost` too), a loopback address (127/8,
    `::1`, and IPv4 ones mapped into IPv6), or the unspecified address (`0.0.0.0`, `::`),
    which connects to the machine itself."""
    name = host.rstrip(".")
    if name in LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def service(endpoint: str, role: str | None = None, *, node: str | None = None) -> str:
    """The name of the service at `endpoint` (a URL, or `host:port`), as `role@host:port`
    when a role is given. The host is lower-cased (DNS names are case-blind); a URL without
    a port takes its scheme's (`DEFAULT_PORTS`); a loopback host is replaced by `node`, the
    machine the caller runs on (default `env.machine()`, read only then; module docstring).
    ValueError for an endpoint with no host, a port that is not one, or a role that is not
    a lowercase word."""
    if role is not None and not _ROLE.fullmatch(role):
        raise ValueError(f"role {role!r} must be a lowercase word such as 'reward' or 'sandbox'")
    text = endpoint.strip()
    parts = urlsplit(text if "://" in text else f"//{text}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # the port is not a number from 0 to 65535
        raise ValueError(f"endpoint {endpoint!r} has no valid port") from None
    if not host:
        raise ValueError(f"endpoint {endpoint!r} names no host")
    if port is None:
        port = DEFAULT_PORTS.get(parts.scheme.lower())
    if is_loopback(host):
        host = (node if node is not None else env.machine()).strip().lower() or host
    where = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    name = where if port is None else f"{where}:{port}"
    named = f"{role}@{name}" if role else name
    if len(named) > MAX_LENGTH or not named.isprintable():
        raise ValueError(f"endpoint {endpoint!r} makes no service name of at most 200 "
                         "printable characters")  # fmt: skip
    return named


def dep_of(
    dep: str | None, endpoint: str | None, role: str | None, *, node: str | None = None
) -> str | None:
    """What an emitter call says the work waits on: `dep` as the user wrote it -- left
    alone, loopback host and all: the user named it -- else the service at `endpoint`
    (named with `role`, on `node`: `service`), else nothing."""
    if dep is not None and endpoint is not None:
        raise ValueError("give dep or endpoint, not both")
    if dep is not None:
        return dep
    return service(endpoint, role, node=node) if endpoint is not None else None
