"""A Spark session a job starts for itself (the command line's, from ``--master``): :class:`SparkToStart`, started
only once the driver's checks have passed (:func:`spark_session`), on 127.0.0.1 with a local master, outside R's
library folders, and, when it does not start, why (the master's words, the Java error's root cause, a standalone
master where nothing answers said at once) with what to do (:func:`master_advice`)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from ..errors import importing, run_error

logger = logging.getLogger("alexnet.launch.spark")  # said as the launcher's own lines


class SparkToStart:
    """A Spark session on ``master`` that has not started yet: a job given it in place of a session starts it
    (:meth:`context`) once the driver's checks have passed, so that a job refused starts no Spark. :meth:`stop`
    stops the session it started."""

    def __init__(self, master: str, app_name: str = "alexnet"):
        self.master, self.app_name = master, app_name
        self.session: Any = None

    @property
    def local(self) -> bool:
        """Whether its master runs the executors on this machine (``local[...]``)."""
        return self.master.startswith("local")

    def local_slots(self) -> int | None:
        """The task slots of a local master, known before it starts: ``N`` of ``local[N]`` (and ``local[N,F]``), this
        process's CPUs for ``local[*]``, 1 for ``local``; None for any other master."""
        found = re.fullmatch(r"local(?:\[\s*(\d+|\*)\s*(?:,\s*\d+\s*)?\])?", self.master.strip())
        if found is None:
            return None
        if found.group(1) is None:
            return 1
        return len(os.sched_getaffinity(0)) if found.group(1) == "*" else int(found.group(1))

    def context(self) -> Any:
        """The SparkContext of its session (:func:`spark_session`), started on the first call."""
        if self.session is None:
            self.session = spark_session(self.master, self.app_name)
        return self.session.sparkContext

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
            self.session = None


def spark_session(master: str, app_name: str = "alexnet") -> Any:
    """A SparkSession on ``master`` whose Python workers run this interpreter (the one that has alexnet).

    A ``local[...]`` master keeps the driver on 127.0.0.1 (and its web UI off): a single machine needs no
    other interface, and Spark would otherwise bind to whatever address the host name resolves to. Spark's
    console stage bar is off, and with a local master its own log shows fatal errors only; with another master,
    errors only while the session starts (``spark.log.level``, unless set), the level its console showed before
    afterwards (:func:`_log_level_before_start`), and no warning of a task that failed (a worker's failure is
    alexnet's error). A
    ``spark://`` master where nothing answers is said at once (Spark itself tries for a minute).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with importing():
        from pyspark.sql import SparkSession

    # Spark's stage bar would garble the chief's progress lines
    builder = SparkSession.builder.master(master).appName(app_name).config("spark.ui.showConsoleProgress", "false")
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
        )
    else:
        unreachable = unanswered_master(master)
        if unreachable:
            raise run_error(f"Spark did not start on `master` = {master!r} ({unreachable}): "
                               f"{master_advice(master)}")
    level = None
    try:
        with _outside_r_libraries():
            if not master.startswith("local"):
                # each of Spark's tries to reach its master, and more, is a warning with its Java stack: its errors
                # alone (why it gave up among them) while it starts, unless the user's Spark configuration sets a level
                level = _log_level_before_start()
                if level is not None:
                    builder = builder.config("spark.log.level", "ERROR")
            session = builder.getOrCreate()
    except Exception as error:  # py4j's Java error
        raise run_error(f"Spark did not start on `master` = {master!r} ({java_reason(str(error))}): "
                           f"{master_advice(master)}") from None
    if master.startswith("local"):
        # the executors are this JVM: a failed worker's Java stack would be printed here, while the error
        # alexnet raises already leads with the worker's own Python error (Spark's message: DEBUG log level)
        session.sparkContext.setLogLevel("FATAL")
    elif level is not None:  # a cluster's warnings say what the user needs (no executors for the job, say)
        session.sparkContext.setLogLevel(level)
        # but not a failed task's Java stack, each time it fails: alexnet's error leads with the worker's own
        _log_errors_only(session, "org.apache.spark.scheduler.TaskSetManager")
    return session


def _log_errors_only(session: Any, name: str) -> None:
    """Spark's logger ``name`` logs errors only (and so leaves out its warnings)."""
    try:
        jvm = session.sparkContext._jvm
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            name, jvm.org.apache.logging.log4j.Level.ERROR)
    except Exception as error:
        logger.debug("Spark's logger %s kept its level: %s", name, error)


#: The file of Spark's own log configuration, used when the user's Spark has none (``log4j2.properties``).
SPARK_DEFAULT_LOG_PROFILE = "org/apache/spark/log4j2-defaults.properties"


def _log_level_before_start() -> str | None:
    """The level of Spark's log that a session's console shows, its JVM started for it: ``WARN`` under Spark's own
    log configuration (its root logger says INFO, but Spark's console shows a Python session warnings and errors
    only; that INFO set again would show every INFO line of the scheduler), else the root logger's level; None when
    the user's Spark configuration sets ``spark.log.level`` or the level cannot be read."""
    with importing():
        from pyspark import SparkConf, SparkContext

    try:
        SparkContext._ensure_initialized()
        if SparkConf().contains("spark.log.level"):
            return None
        jvm = SparkContext._jvm
        if jvm is None:
            return None
        log4j = jvm.org.apache.logging.log4j
        source = log4j.LogManager.getContext(False).getConfiguration().getConfigurationSource().getLocation()
        if str(source).endswith(SPARK_DEFAULT_LOG_PROFILE):
            return "WARN"
        return str(log4j.LogManager.getRootLogger().getLevel().toString())
    except Exception as error:
        logger.debug("Spark's log level was not read: %s", error)
        return None


#: What Spark says of a master that would not take the application, in the Java error where it holds it.
_MASTER_SAYS = ("All masters are unresponsive! Giving up.", "Master removed our application")
#: A line of a Java error that names an exception: ``java.lang.IllegalStateException: ...``, ``Caused by: ...``.
_JAVA_EXCEPTION = re.compile(r"^\s*(?:Caused by:\s*|:\s*)?((?:[A-Za-z_$][\w$]*\.)+[\w$]*(?:Exception|Error)\b.*)$",
                             re.MULTILINE)


def java_reason(text: str) -> str:
    """Why Spark did not start, from the text of its Java error (py4j's, its first line the call that failed): a
    master's own words where the text holds them, else the root cause (the last exception a ``Caused by:`` names),
    else the text's first line; a context Spark stopped as it started (on a master that did not take the
    application) is said as such, since the error holds no reason, and Spark's log above gives it."""
    for words in _MASTER_SAYS:
        at = text.find(words)
        if at >= 0:
            return text[at:].splitlines()[0].strip()[:300]
    found = [m.group(1).strip() for m in _JAVA_EXCEPTION.finditer(text)]
    if found and "stopped SparkContext" in found[-1]:
        return "Spark stopped as it started: its ERROR line above says why"
    said = found[-1] if found else next((line.strip() for line in text.splitlines() if line.strip()), "")
    return (said or "no reason given")[:300]


#: Seconds a ``spark://`` master's port is given to answer before Spark starts (:func:`unanswered_master`).
MASTER_PATIENCE = 5.0


def unanswered_master(master: str, patience: float = MASTER_PATIENCE) -> str | None:
    """For a standalone master ``spark://host:port[,host:port...]``: what happened when none of its addresses took a
    TCP connection within ``patience`` seconds (``nothing answers at 127.0.0.1:7077: Connection refused``), else
    None (also for other masters and for a URL Spark itself will refuse)."""
    import socket

    if not master.startswith("spark://"):
        return None
    said = []
    for address in master[len("spark://"):].split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            return None
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=patience):
                return None
        except OSError as error:
            said.append(f"{host}:{port}: {error.strerror or error}")
    return f"nothing answers at {'; '.join(said)}"


@contextlib.contextmanager
def _outside_r_libraries() -> Iterator[None]:
    """``LD_LIBRARY_PATH`` without R's library folders while Spark's JVM starts (its environment is this process's),
    so that the Python workers it starts load their own ``libpython``, not the system's that R's folders hold
    (:func:`alexnet.child.python_environment`); outside R this changes nothing."""
    from ..child import python_environment

    def put(value: str | None) -> None:
        if value is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = value

    before = os.environ.get("LD_LIBRARY_PATH")
    put(python_environment().get("LD_LIBRARY_PATH"))
    try:
        yield
    finally:
        put(before)


def master_advice(master: str) -> str:
    """What to do when Spark did not start on ``master``: for a master of a kind Spark takes, what that kind needs;
    else the kinds it takes."""
    if master.startswith("spark://"):
        return ("no Spark master answered there: start it (spark-class org.apache.spark.deploy.master.Master, or "
                "sbin/start-master.sh), or give the URL its web UI shows.")
    if master == "yarn" and not (os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR")):
        return "a YARN master needs HADOOP_CONF_DIR (or YARN_CONF_DIR) set to the cluster's configuration folder."
    return "give a master Spark takes, e.g. 'local[2]', 'spark://host:7077', 'yarn' or 'k8s://https://host:443'."
