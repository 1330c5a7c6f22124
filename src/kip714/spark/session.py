"""The Spark session kip714 runs on: ``local[*]`` unless a master is named, Arrow on, and sizes that keep the
JVM's memory flat whatever the input (bounded Arrow batches and partitions, a committed driver heap)."""

from typing import TYPE_CHECKING

from .._extras import require

if TYPE_CHECKING:  # pyspark is the spark extra: imported by the functions that need it
    from pyspark.sql import SparkSession

__all__ = [
    "local_session",
    "session_defaults",
    "default_driver_memory",
    "driver_java_options",
    "ARROW_BATCH_ROWS",
    "ARROW_BATCH_BYTES",
    "PARTITION_BYTES",
    "CONCURRENT_WRITERS",
    "DRIVER_MEMORY_MIB",
]

#: Rows and bytes per Arrow batch Spark sends to the Python workers (``maxRecordsPerBatch``,
#: ``maxBytesPerBatch``), and the bytes of input files packed into one partition (``maxPartitionBytes``):
#: small enough that a task's input is a few tens of MB of compressed payloads, large enough that per-batch
#: and per-task overheads do not show.
ARROW_BATCH_ROWS = 4096
ARROW_BATCH_BYTES = 16 << 20
PARTITION_BYTES = 32 << 20
#: Parquet files a write task keeps open at once (``spark.sql.maxConcurrentOutputFileWriters``). Spark's
#: default (0) sorts every task's rows by the partition columns before a ``partitionBy`` write: for the
#: points table (``partitionBy("date")``, one or two dates per task) that sort is a third of the pipeline's
#: time and what grew the JVM to its whole heap (2.75 M points on local[2]: 51-56 s and 3.7 GB resident with
#: the sort, 39 s and 1.0 GB with 8 writers, same run). Past this many dates in one task Spark falls back to
#: sorting the rest.
CONCURRENT_WRITERS = 8
#: The local session's driver heap (MiB) unless the machine has less than eight times it (see
#: :func:`default_driver_memory`).
DRIVER_MEMORY_MIB = 768


def _physical_memory() -> int | None:
    """Bytes of RAM this process may use: the machine's, or the cgroup's limit when lower."""
    import os

    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return total


def default_driver_memory() -> str:
    """The driver heap kip714 asks for: 768m, or an eighth of this machine's RAM (or cgroup limit) when that
    is less, not below 512m. In local mode the driver JVM also runs the executors; the decoders stream in
    bounded batches, so the heap after a collection stays under ~0.5 GB at any input size (measured from
    10^5 to 3·10^7 points, ``kip714 bench --only pipeline-scale``) and the pipeline runs in 512m (tested). A
    larger heap is not faster: G1 only grows into it under the allocation rate of a long job, so resident
    memory grew with the input (0.8 GB at 10^6 points, 1.6 GB at 10^7 with 3g, same run).
    ``KIP714_SPARK_DRIVER_MEMORY`` overrides it."""
    import os

    env = os.environ.get("KIP714_SPARK_DRIVER_MEMORY")
    if env:
        return env
    total = _physical_memory()
    mib = DRIVER_MEMORY_MIB if total is None else total // 8 // (1 << 20)
    return f"{min(max(mib, 512), DRIVER_MEMORY_MIB)}m"


def driver_java_options(driver_memory: str) -> str:
    """The JVM options of a local session (``spark.driver.defaultJavaOptions``, which a user's
    ``spark.driver.extraJavaOptions`` adds to): the whole heap committed and touched at start
    (``-Xms`` = the heap, ``-XX:+AlwaysPreTouch``) and a young generation of a quarter of it, so the JVM's
    resident size is set by the heap it was given, not by how long the job runs (G1 otherwise grows the heap
    under a long job's allocation rate and the resident size follows the input)."""
    mib = _mib(driver_memory)
    if mib is None:
        return ""
    return f"-Xms{mib}m -Xmn{max(mib // 4, 32)}m -XX:+AlwaysPreTouch"


def _memory_size(size: str) -> tuple[int, str] | None:
    """A Spark/JVM memory size (``768m``, ``2g``, ``512mb``, ``1048576``) as (number, unit letter, ``""`` for
    bytes); None when it does not parse."""
    import re

    m = re.fullmatch(r"(\d+)([kmgt]?)b?", size.strip().lower())
    return (int(m.group(1)), m.group(2)) if m else None


def _mib(size: str) -> int | None:
    """MiB of a JVM memory size (``768m``, ``2g``, ``1048576k``); None when it does not parse."""
    parsed = _memory_size(size)
    if parsed is None:
        return None
    number, unit = parsed
    return max(1, number * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[unit] >> 20)


def session_defaults() -> dict[str, str]:
    """The configuration :func:`local_session` applies unless ``conf`` overrides it."""
    memory = default_driver_memory()
    return {
        "spark.ui.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": memory,
        "spark.driver.defaultJavaOptions": driver_java_options(memory),
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(ARROW_BATCH_ROWS),
        "spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_BATCH_BYTES),
        "spark.sql.files.maxPartitionBytes": str(PARTITION_BYTES),
        "spark.sql.maxConcurrentOutputFileWriters": str(CONCURRENT_WRITERS),
    }


def local_session(
    master: str | None = None,
    app_name: str = "kip714",
    partitions: int | None = None,
    progress: bool = False,
    conf: dict[str, str] | None = None,
) -> "SparkSession":
    """A SparkSession for kip714 work: ``local[*]`` unless ``master`` names a cluster; Arrow enabled,
    the UI off, quiet logs, and the sizes of :func:`session_defaults` (a 768m driver heap committed at start,
    less on a small machine; Arrow batches and input partitions bounded in bytes). ``conf``: Spark settings that
    override those
    (as ``spark-submit --conf``). The driver heap (``spark.driver.memory``) only takes effect when this call
    starts the JVM; under ``spark-submit`` or with a JVM already running, give it there."""
    require("spark", "kip714.spark.local_session")
    import os

    from pyspark.sql import SparkSession

    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # launched by spark-submit: keep its master
    if not under_submit:
        os.environ.setdefault("PYSPARK_PYTHON", __import__("sys").executable)
    builder = SparkSession.builder.appName(app_name)
    if master or not under_submit:
        builder = builder.master(master or "local[*]")
    settings = session_defaults()
    settings["spark.ui.showConsoleProgress"] = "true" if progress else "false"
    if partitions:
        settings["spark.sql.shuffle.partitions"] = str(partitions)
    conf = dict(conf or {})
    if "spark.driver.memory" in conf and "spark.driver.defaultJavaOptions" not in conf:
        conf["spark.driver.defaultJavaOptions"] = driver_java_options(conf["spark.driver.memory"])
    settings.update(conf)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
