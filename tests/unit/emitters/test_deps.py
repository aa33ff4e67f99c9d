"""One name per service (contract section 8, `dep`): from an endpoint, `host:port` with an
optional role, whichever form the endpoint is written in; and where a trajectory's phase
and a request say it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import read_events

from runwatch.emitters import Emitter
from runwatch.emitters.deps import service


@pytest.mark.parametrize(
    ("endpoint", "role", "name"),
    [
        ("http://rm-1:8000/score", "reward", "reward@rm-1:8000"),
        ("rm-1:8000", "reward", "reward@rm-1:8000"),
        ("HTTP://RM-1:8000", "reward", "reward@rm-1:8000"),  # DNS is case-blind
        ("https://pool-a/run?x=1#frag", "sandbox", "sandbox@pool-a:443"),  # the scheme's port
        ("http://pool-a", None, "pool-a:80"),
        ("https://user:secret@pool-a:8443/v1", "sandbox", "sandbox@pool-a:8443"),  # no secret
        ("  rm-1:8000  ", None, "rm-1:8000"),
        ("http://[fd00::5]:8000/v1", "reward", "reward@[fd00::5]:8000"),
        ("10.0.0.5:8000", "inference", "inference@10.0.0.5:8000"),
        ("grpc://judge:50051", "judge", "judge@judge:50051"),
        ("judge", None, "judge"),  # a port it does not know is not made up
    ],
)
def test_every_form_of_one_endpoint_is_one_name(endpoint: str, role: str | None, name: str) -> None:
    assert service(endpoint, role) == name


@pytest.mark.parametrize(
    ("endpoint", "role", "error"),
    [
        ("http://:8000/x", None, "names no host"),
        ("", None, "names no host"),
        ("rm-1:99999", None, "no valid port"),
        ("rm-1:80", "Reward", "lowercase word"),
        ("rm-1:80", "re ward", "lowercase word"),
        ("x" * 300 + ":80", None, "at most 200"),
    ],
)
def test_an_endpoint_that_names_no_service_is_said(
    endpoint: str, role: str | None, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        service(endpoint, role)


@pytest.mark.parametrize(
    ("endpoint", "name"),
    [
        ("localhost:8000", "reward@node-1:8000"),
        ("http://LOCALHOST:8000/score", "reward@node-1:8000"),
        ("localhost.:8000", "reward@node-1:8000"),
        ("http://reward.localhost:8000", "reward@node-1:8000"),  # RFC 6761: all of .localhost
        ("localhost.localdomain:8000", "reward@node-1:8000"),
        ("127.0.0.1:8000", "reward@node-1:8000"),
        ("http://127.1.2.3:8000/score", "reward@node-1:8000"),  # all of 127/8
        ("http://[::1]:8000/score", "reward@node-1:8000"),
        ("http://[::ffff:127.0.0.1]:8000", "reward@node-1:8000"),
        ("0.0.0.0:8000", "reward@node-1:8000"),  # connects to the machine itself
        ("http://[::]:8000", "reward@node-1:8000"),
        ("http://localhost", "reward@node-1:80"),  # the scheme's port still
    ],
)
def test_a_loopback_endpoint_is_named_by_the_node_it_is_reached_on(
    endpoint: str, name: str
) -> None:
    """A reward server or sandbox per node, reached over loopback, is a different server on
    every node: named by the node, as a process elsewhere would reach it."""
    assert service(endpoint, "reward", node="node-1") == name
    assert service(endpoint, "reward", node="node-2") == name.replace("node-1", "node-2")


@pytest.mark.parametrize(
    "endpoint",
    ["rm-1:8000", "http://10.0.0.5:8000", "http://[fd00::5]:8000", "128.0.0.1:8000",
     "localhost-proxy:8000", "mylocalhost:8000", "http://[fe80::1]:8000"],
)  # fmt: skip
def test_a_host_elsewhere_is_named_as_written_whatever_the_node(endpoint: str) -> None:
    assert service(endpoint, node="node-1") == service(endpoint, node="node-2")
    assert "node-" not in service(endpoint, node="node-1")


def test_the_node_is_named_as_a_host_is() -> None:
    """Lower-cased (DNS is case-blind); an IPv6 node keeps its brackets."""
    assert service("localhost:8000", "reward", node="GPU-Node-17") == "reward@gpu-node-17:8000"
    assert service("127.0.0.1:8000", node="fd00::7") == "[fd00::7]:8000"


def test_without_a_node_a_loopback_endpoint_takes_the_machine_s_host_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`localhost` is the network namespace's: the host name's (a pod's on Kubernetes), not
    the node RUNWATCH_NODE names, so two pods' sidecars on one node stay two services."""
    import socket

    from runwatch.emitters.deps import dep_of

    here = socket.gethostname().lower()
    monkeypatch.setenv("RUNWATCH_NODE", "gpu-node-17")
    assert service("localhost:8000", "reward") == f"reward@{here}:8000"
    assert dep_of(None, "http://127.0.0.1:8000", "reward") == f"reward@{here}:8000"
    monkeypatch.setattr(socket, "gethostname", lambda: "pod-b")
    assert service("localhost:8000", "reward") == "reward@pod-b:8000"


def test_a_dep_the_user_wrote_is_left_alone() -> None:
    """The user named it: a dep written out, loopback host and all, is what they wrote."""
    from runwatch.emitters.deps import dep_of

    assert dep_of("reward@localhost:8000", None, "reward", node="node-1") == (
        "reward@localhost:8000")  # fmt: skip
    assert dep_of(None, "localhost:8000", "reward", node="node-1") == "reward@node-1:8000"


@pytest.fixture
def em(tmp_path: Path) -> Iterator[Emitter]:
    emitter = Emitter(run="run-1", component="rollout", path=tmp_path, heartbeat=False)
    yield emitter
    emitter.close()


def test_a_phase_and_a_request_say_what_they_wait_on(em: Emitter, tmp_path: Path) -> None:
    with em.trajectory("t-1", step=1) as t:
        t.phase("generate")
        t.phase("sandbox", endpoint="https://pool-a.internal/run")
        t.phase("reward", dep="reward@rm-1:8000")
        t.phase("judge", dep="my_judge_fn")  # no endpoint: the user's own name
    with em.request("q-1", server="vllm-0", endpoint="http://10.0.0.5:8000/v1"):
        pass
    with pytest.raises(ValueError, match="not both"):
        em.request("q-2", dep="a", endpoint="b:1")
    em.flush()
    events = read_events(tmp_path)  # each checked against the models
    phases = [(e["phase"], e.get("dep")) for e in events if e["kind"] == "trajectory.phase"]
    assert phases == [
        ("generate", None),
        ("sandbox", "sandbox@pool-a.internal:443"),
        ("reward", "reward@rm-1:8000"),
        ("judge", "my_judge_fn"),
    ]
    requests = [e for e in events if e["kind"].startswith("request.")]
    assert {e["dep"] for e in requests} == {"inference@10.0.0.5:8000"}


def test_src_host_is_the_node_when_runwatch_node_says_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Kubernetes the host name is the pod's; the chart sets RUNWATCH_NODE from the
    downward API's spec.nodeName (contract section 8)."""
    import socket

    monkeypatch.setenv("RUNWATCH_NODE", "gpu-node-17")
    on_node = Emitter(run="r", component="rollout", path=tmp_path / "a", heartbeat=False)
    on_node.emit("heartbeat")
    on_node.close()
    monkeypatch.delenv("RUNWATCH_NODE")
    plain = Emitter(run="r", component="rollout", path=tmp_path / "b", heartbeat=False)
    plain.emit("heartbeat")
    plain.close()
    given = Emitter(run="r", component="rollout", path=tmp_path / "c", heartbeat=False,
                    host="h-1")  # fmt: skip
    given.emit("heartbeat")
    given.close()
    hosts = [{e["src"]["host"] for e in read_events(tmp_path / d)} for d in "abc"]
    assert hosts == [{"gpu-node-17"}, {socket.gethostname()}, {"h-1"}]


def test_an_emitter_names_a_loopback_service_by_its_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The phase's, the request's and a held call's dep name the machine whose loopback it
    is: `host=` when given, else the host name (a pod's), whatever RUNWATCH_NODE makes
    `src.host`; the dep the user wrote is left as written."""
    import socket

    monkeypatch.setenv("RUNWATCH_NODE", "node-9")
    monkeypatch.setattr(socket, "gethostname", lambda: "node-1")
    on_node = Emitter(run="r", component="rollout", path=tmp_path / "a", heartbeat=False)
    given = Emitter(run="r", component="rollout", path=tmp_path / "b", heartbeat=False,
                    host="node-2")  # fmt: skip
    for em in (on_node, given):
        with em.trajectory("t-1", step=1) as t:
            t.phase("reward", endpoint="http://localhost:8000/score")
            t.phase("sandbox", endpoint="127.0.0.1:8080")
            t.phase("judge", dep="judge@localhost:9000")
            with t.call("tool", endpoint="http://[::1]:7000/search"):
                pass
        with em.request("q-1", server="vllm-0", endpoint="http://0.0.0.0:8001/v1"):
            pass
        em.close()
    for d, node, host in (("a", "node-1", "node-9"), ("b", "node-2", "node-2")):
        events = read_events(tmp_path / d)
        assert {e["src"]["host"] for e in events} == {host}
        deps = [e["dep"] for e in events if e["kind"] == "trajectory.phase" or
                e["kind"] == "request.queued"]  # fmt: skip
        assert deps == [f"reward@{node}:8000", f"sandbox@{node}:8080", "judge@localhost:9000",
                        f"tool@{node}:7000", f"inference@{node}:8001"]  # fmt: skip


def test_verl_s_config_names_the_reward_and_tool_services() -> None:
    """Where verl 0.9.1 keeps them (read from its source: workers/config/reward.py,
    SandboxFusionConfig.url; a tool's config dict, e.g. `sandbox_fusion_url`); a config that
    names none, or names nonsense, makes no dep and no error."""
    from types import SimpleNamespace

    from runwatch.emitters.verl import reward_dep, tool_dep

    class Struct(dict[str, Any]):
        """An OmegaConf struct's manners: a key it lacks raises."""

        def get(self, key: str, default: Any = None) -> Any:
            if key not in self:
                raise KeyError(key)
            return self[key]

    migrated = Struct(reward=Struct(sandbox_fusion=Struct(url="https://sandbox.internal/run")))
    legacy = {"sandbox_fusion": {"url": "http://10.1.2.3:8080/run_code"}}
    assert reward_dep(migrated) == "reward@sandbox.internal:443"
    assert reward_dep(legacy) == "reward@10.1.2.3:8080"
    assert reward_dep(Struct(reward=Struct(sandbox_fusion=Struct(url=None)))) is None
    assert reward_dep(Struct()) is None
    tool = SimpleNamespace(config={"type": "native", "sandbox_fusion_url": "https://pool-a/x"})
    assert tool_dep(tool) == "tool@pool-a:443"
    assert tool_dep(SimpleNamespace(config={"url": "http://search:8000/retrieve"})) == (
        "tool@search:8000")  # fmt: skip
    assert tool_dep(SimpleNamespace(config={"url": "http://:bad"})) is None
    assert tool_dep(SimpleNamespace(name="fn")) is None  # a function tool: no config
    local = {"sandbox_fusion": {"url": "http://localhost:8080/run_code"}}  # one per node
    assert reward_dep(local, "node-1") == "reward@node-1:8080"
    tool = SimpleNamespace(config={"sandbox_fusion_url": "http://127.0.0.1:8080/run_code"})
    assert tool_dep(tool, "node-2") == "tool@node-2:8080"
