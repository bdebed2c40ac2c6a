import json
import socket

import pytest

from alexnet.bench.cluster import free_base_port
from alexnet.errors import AlexnetError
from alexnet.train import cluster
from alexnet.train.cluster import tf_config, tf_config_json


def test_one_host_gets_one_port_per_task():
    addresses = ["127.0.0.1:41234", "127.0.0.1:41235", "127.0.0.1:41236"]
    configs = [tf_config(addresses, i) for i in range(3)]
    workers = configs[0]["cluster"]["worker"]
    assert workers == ["127.0.0.1:8000", "127.0.0.1:8001", "127.0.0.1:8002"]
    assert len(set(workers)) == 3
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(3)]
    assert all(c["cluster"] == configs[0]["cluster"] for c in configs)


def test_several_hosts_keep_their_order_and_base_port():
    addresses = ["10.0.0.7:37001", "10.0.0.8:37001", "[fe80::1]:37001"]
    config = tf_config(addresses, 2, base_port=9000)
    assert config["cluster"]["worker"] == ["10.0.0.7:9000", "10.0.0.8:9001", "[fe80::1]:9002"]
    assert config["task"] == {"type": "worker", "index": 2}


def test_json_is_what_tensorflow_reads():
    parsed = json.loads(tf_config_json(["a:1", "b:2"], 1))
    assert parsed == {"cluster": {"worker": ["a:8000", "b:8001"]}, "task": {"type": "worker", "index": 1}}


@pytest.mark.parametrize(("addresses", "index", "message"), [
    ([], 0, "at least one task"),
    (["a:1", "b:2"], 2, r"0\.\.1"),
    (["a:1"], -1, r"0\.\.0"),
])
def test_bad_input_says_what_is_wrong(addresses, index, message):
    with pytest.raises(AlexnetError, match=message):
        tf_config(addresses, index)


def listener(port: int) -> socket.socket:
    """A socket listening on every address at ``port``, one that lets others share it (``SO_REUSEPORT``) at that."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    held.bind(("", port))
    held.listen()
    return held


def test_a_port_another_process_listens_on_is_told_before_tensorflow_tries_it(monkeypatch):
    monkeypatch.setattr(cluster, "_OWN_PORTS", set())
    base = free_base_port(2)
    with listener(base + 1):
        cluster.check_port_free(tf_config(["127.0.0.1:7077", "127.0.0.1:7078"], 0, base))  # worker 0's port is free
        with pytest.raises(AlexnetError, match=rf"Port {base + 1} on this host, .*127.0.0.1:{base + 1} in TF_CONFIG"
                                               r".* already in use.*`base_port`"):
            cluster.check_port_free(tf_config(["127.0.0.1:7077", "127.0.0.1:7078"], 1, base))
    # once free, it passes; this process's own server then holds it (once the strategy is built, took_port()), which
    # a later check does not count
    port = cluster.check_port_free(tf_config(["127.0.0.1:7077", "127.0.0.1:7078"], 1, base))
    assert port == base + 1 and port not in cluster._OWN_PORTS, "found free is not yet taken"
    cluster.took_port(port)
    with listener(base + 1):
        cluster.check_port_free(tf_config(["127.0.0.1:7077", "127.0.0.1:7078"], 1, base))


def test_a_taken_port_in_the_ephemeral_range_is_told_so_with_the_port_to_stay_below(monkeypatch):
    monkeypatch.setattr(cluster, "_OWN_PORTS", set())
    base = free_base_port(1)
    addresses = ["127.0.0.1:7077"]
    with listener(base):
        # outside the range (as free_base_port chooses): the message says nothing of it
        with pytest.raises(AlexnetError) as error:
            cluster.check_port_free(tf_config(addresses, 0, base))
        assert "ephemeral" not in str(error.value)
        monkeypatch.setattr(cluster, "ephemeral_ports", lambda: (base - 5, base + 5))
        with pytest.raises(AlexnetError, match=rf"Port {base} lies in this host's ephemeral range \({base - 5}-"
                                               rf"{base + 5}\).* a base_port below {base - 5} "):
            cluster.check_port_free(tf_config(addresses, 0, base))
