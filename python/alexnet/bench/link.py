"""Workers joined by a network link of a chosen bandwidth and latency, on one machine.

A :class:`LinkSpec` is a link as the ``scaling`` stage is given it: ``"loopback"`` (the workers talk over
127.0.0.1, unshaped) or a rate in bits per second with a round-trip time, written as ``tc`` writes rates:
``"1gbit"``, ``"10gbit"``, ``"200mbit"``, with ``"/0.5ms"`` to add a round-trip time (which needs the kernel's
``netem`` queue; without it a link has the veth pair's own round trip, a few hundredths of a millisecond, which
:func:`round_trip_ms` measures).

:class:`Network` makes a shaped link real: one network namespace per worker and one for a switch (a Linux
bridge); each worker's namespace is joined to the bridge by a veth pair whose two ends are shaped, so that every
worker sends and receives at most the link's rate (``tbf``) and, when the spec adds a round trip, every packet
waits a quarter of it at each of the four queues it passes there and back (``netem``): N machines with one network
card each on a switch. Everything it makes is named after this process (``alexnet-<pid>-...``) and removed when
the ``with`` block ends, also on an error, on Ctrl-C or on SIGTERM; what a killed process left behind is removed by
the next one (:func:`sweep_stale`). Making namespaces needs root; :func:`can_shape` says whether this process can.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import AlexnetError
from ..scratch import process_alive

logger = logging.getLogger(__name__)

#: The prefix of every namespace made here.
PREFIX = "alexnet-"
#: The subnet the workers' addresses are taken from (inside namespaces made here only).
SUBNET = "10.213.7"
_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
_SPEC = re.compile(r"^(?P<rate>\d+(?:\.\d+)?)(?P<unit>[kmgt]?bit)(?:/(?P<rtt>\d+(?:\.\d+)?)(?P<rtt_unit>ms|us))?$")


@dataclass(frozen=True)
class LinkSpec:
    """A link: ``rate`` bits per second and ``rtt_ms`` of round trip added (None: none), or loopback (``rate``
    None)."""

    name: str
    rate: float | None = None
    rtt_ms: float | None = None

    @property
    def shaped(self) -> bool:
        """Is this a shaped link (not loopback)?"""
        return self.rate is not None

    def describe(self) -> str:
        """``"loopback (127.0.0.1, unshaped)"``, ``"1 Gbit/s"`` or ``"1 Gbit/s, 0.5 ms round trip added"``."""
        if self.rate is None:
            return "loopback (127.0.0.1, unshaped)"
        return _rate_words(self.rate) + ("" if self.rtt_ms is None else f", {self.rtt_ms:g} ms round trip added")


def _rate_words(rate: float) -> str:
    for unit, size in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if rate >= size:
            return f"{rate / size:g} {unit}"
    return f"{rate:g} bit/s"


def parse_link(value: str) -> LinkSpec:
    """One link spec (see the module documentation); an :class:`AlexnetError` that shows the forms taken."""
    word = str(value).strip().lower().replace(" ", "")
    if word in ("loopback", "lo", "localhost"):
        return LinkSpec("loopback")
    match = _SPEC.match(word)
    if not match or float(match["rate"]) <= 0:
        raise AlexnetError(f"Unknown link {value!r}: give \"loopback\" or a rate as tc writes it, \"1gbit\", "
                           "\"10gbit\", \"200mbit\", optionally with a round trip added: \"1gbit/0.5ms\".")
    rate = float(match["rate"]) * _UNITS[match["unit"]]
    rtt = None if match["rtt"] is None else float(match["rtt"]) / (1000.0 if match["rtt_unit"] == "us" else 1)
    return LinkSpec(word, rate, rtt)


def link_setting(value: Any, name: str) -> str:
    """A setting that names one link (``value``, as :func:`parse_link` reads it) checked: its spec's name; an
    :class:`AlexnetError` that names the setting otherwise."""
    if not isinstance(value, str):
        raise AlexnetError(f"`{name}` must be one link, \"loopback\" or a rate such as \"1gbit\", not {value!r}.")
    try:
        return parse_link(value).name
    except AlexnetError as error:
        raise AlexnetError(f"`{name}`: {error}") from None


def parse_links(values: Sequence[str] | str) -> list[LinkSpec]:
    """Link specs from a list, or from one string separated by commas; loopback first, in the order given."""
    words = values.split(",") if isinstance(values, str) else [w for v in values for w in str(v).split(",")]
    links = list(dict.fromkeys(parse_link(w) for w in words if w.strip()))
    if not links:
        raise AlexnetError("No link given: name at least one, \"loopback\" or a rate such as \"1gbit\".")
    return sorted(links, key=lambda link: link.shaped)


def can_shape() -> str | None:
    """``None`` when this process can make namespaces and shape links; else why not, in words."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "shaped links need Linux network namespaces"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"shaped links need {' and '.join(missing)} (iproute2)"
    if os.geteuid() != 0:
        return "shaped links need root (network namespaces and tc)"
    return None


#: Why a round trip cannot be added on this machine, in words.
NO_NETEM = ("this kernel has no netem queue (CONFIG_NET_SCH_NETEM), which adds the round trip; give the rate alone "
            "(\"1gbit\")")


def can_delay() -> str | None:
    """``None`` when this process, which can shape links (:func:`can_shape`), can also add a round trip: the kernel
    has ``netem``, tried on the loopback device of a namespace made and removed for it; else why not, in words."""
    name = f"{PREFIX}{os.getpid()}-netem"
    try:
        _run("ip", "netns", "add", name)
    except AlexnetError as error:
        return f"no network namespace could be made ({error})"
    try:
        _run("ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1us")
    except AlexnetError:
        return NO_NETEM
    finally:
        with contextlib.suppress(AlexnetError):
            _run("ip", "netns", "delete", name)
    return None


def _run(*command: str) -> None:
    done = subprocess.run(list(command), capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0:
        raise AlexnetError(f"`{' '.join(command)}` failed: {(done.stderr or done.stdout).strip()}")


def namespaces() -> list[str]:
    """The network namespaces that exist now (``ip netns list``)."""
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False, timeout=30)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def sweep_stale() -> list[str]:
    """Remove the namespaces this module made for processes that no longer run; those removed."""
    removed = []
    for name in namespaces():
        match = re.match(rf"^{re.escape(PREFIX)}(\d+)-", name)
        if match and not process_alive(int(match[1])):
            with contextlib.suppress(AlexnetError):
                _run("ip", "netns", "delete", name)
                removed.append(name)
    if removed:
        logger.info("Removed network namespaces left by a process that was killed: %s", ", ".join(removed))
    return removed


def _shape(namespace: str, device: str, link: LinkSpec) -> None:
    """tbf (the rate) on ``device``'s way out, under netem (a quarter of the round trip) when one is added."""
    rate = link.rate or 0.0
    burst = max(64 * 1024, int(rate / 8 * 0.004))  # 4 ms of traffic: enough for the timer's granularity
    limit = burst + int(rate / 8 * 0.05)  # 50 ms of queue
    tc = ("ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", device)
    parent: tuple[str, ...] = ("root",)
    if link.rtt_ms is not None:
        delay_us = max(1, round(link.rtt_ms * 1000 / 4))
        try:
            _run(*tc, "root", "handle", "1:", "netem", "delay", f"{delay_us}us", "limit", "100000")
        except AlexnetError as error:
            raise AlexnetError(f"Cannot add a round trip to link {link.name!r}: {error}. Perhaps {NO_NETEM}.") \
                from None
        parent = ("parent", "1:")
    _run(*tc, *parent, "handle", "2:", "tbf", "rate", f"{int(rate)}bit", "burst", str(burst), "limit", str(limit))


def round_trip_ms(command: Sequence[str], address: str, count: int = 5) -> float | None:
    """The median round trip in milliseconds from where ``command`` runs (a namespace) to ``address`` (ping);
    ``None`` when it cannot be measured."""
    if shutil.which("ping") is None:
        return None
    done = subprocess.run([*command, "ping", "-c", str(count), "-i", "0.2", "-q", address], capture_output=True,
                          text=True, check=False, timeout=30)
    match = re.search(r"= [\d.]+/([\d.]+)/", done.stdout)
    return float(match[1]) if done.returncode == 0 and match else None


class Network:
    """``workers`` network namespaces on a switch, every worker's link shaped as ``link`` says (see the module
    documentation); :attr:`addresses` and :meth:`command` tell where worker ``i`` listens and how to start a
    program in its namespace. A context manager: leaving it removes every namespace it made."""

    def __init__(self, workers: int, link: LinkSpec):
        if not link.shaped:
            raise ValueError("a Network is for shaped links; loopback needs none")
        self.workers, self.link = workers, link
        tag = f"{PREFIX}{os.getpid()}"
        self.switch = f"{tag}-sw"
        self.names = [f"{tag}-w{i}" for i in range(workers)]
        self.addresses = [f"{SUBNET}.{i + 1}" for i in range(workers)]
        self._made: list[str] = []
        self._previous: Any = None

    def command(self, index: int) -> list[str]:
        """What goes before a command to run it in worker ``index``'s namespace."""
        return ["ip", "netns", "exec", self.names[index]]

    def __enter__(self) -> Network:
        sweep_stale()
        self._previous = signal.getsignal(signal.SIGTERM)
        with contextlib.suppress(ValueError):  # not the main thread: Ctrl-C and errors still clean up
            signal.signal(signal.SIGTERM, _terminate)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _build(self) -> None:
        pid = os.getpid()
        for name in (self.switch, *self.names):
            _run("ip", "netns", "add", name)
            self._made.append(name)
        _run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", self.switch, "link", "set", "br0", "up")
        for i, name in enumerate(self.names):
            inner, outer = f"ax{pid}w{i}", f"ax{pid}p{i}"
            _run("ip", "link", "add", inner, "netns", name, "type", "veth", "peer", "name", outer, "netns",
                 self.switch)
            _run("ip", "-n", name, "addr", "add", f"{self.addresses[i]}/24", "dev", inner)
            for namespace, device in ((name, inner), (name, "lo"), (self.switch, outer)):
                _run("ip", "-n", namespace, "link", "set", device, "up")
            _run("ip", "-n", self.switch, "link", "set", outer, "master", "br0")
            _shape(name, inner, self.link)
            _shape(self.switch, outer, self.link)
        logger.info("Network of %d namespaces on a switch, each link %s.", self.workers, self.link.describe())

    def close(self) -> None:
        """Remove every namespace made (with their links); safe to call twice."""
        while self._made:
            name = self._made.pop()
            try:
                _run("ip", "netns", "delete", name)
            except AlexnetError as error:
                logger.warning("Could not remove network namespace %s: %s", name, error)
        if self._previous is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


@contextlib.contextmanager
def joined(workers: int, link: LinkSpec) -> Iterator[tuple[list[str], list[list[str]]]]:
    """The workers' hosts and the command prefixes that run a program where they are: 127.0.0.1 and nothing for
    loopback, else the namespaces of a :class:`Network` (removed after the block)."""
    if not link.shaped:
        yield ["127.0.0.1"] * workers, [[] for _ in range(workers)]
        return
    with Network(workers, link) as network:
        yield list(network.addresses), [network.command(i) for i in range(workers)]
