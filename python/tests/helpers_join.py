"""Workers that meet as a hand launch's do (:func:`alexnet.train.joining.meet_workers`), each in a thread of the
test's process."""

from __future__ import annotations


def met_in_threads(clusters: list[list[str]], bound: float, every: float | None = None) -> dict[int, BaseException]:
    """The error each of the workers given ``clusters`` (one a worker, each in a thread of this process) ended its
    :func:`~alexnet.train.joining.meet_workers` with, a server taking each port it was given once it met the others."""
    import socket
    import threading

    from alexnet.train import joining

    said: dict[int, BaseException] = {}
    servers: list[socket.socket] = []

    def worker(index: int) -> None:
        config = {"cluster": {"worker": clusters[index]}, "task": {"type": "worker", "index": index}}
        port = int(clusters[index][index].rpartition(":")[2])
        try:
            joining.meet_workers(config, bound, hold=port, every=every)
            servers.append(socket.create_server(("127.0.0.1", port)))  # TensorFlow's server, next
        except BaseException as error:
            said[index] = error

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(clusters))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        for server in servers:
            server.close()
    assert not any(t.is_alive() for t in threads), said
    return said
