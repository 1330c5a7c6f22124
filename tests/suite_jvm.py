"""The JVM options of the suite's short-lived JVMs: Spark's (set by tests/conftest.py) and the JDK oracles'
(``javac`` and ``java`` in test_javaorder_jdk, test_gzip_jdk and test_snappy_java).

They live seconds, not hours: JIT-compiled with C1 only, a Spark start costs 13 CPU-seconds instead of 23
(``local_session`` + one job, measured here); with the serial collector (no GC threads competing for the two
cores) the session's tests take 86 CPU-seconds instead of 96; the longest job (test_spark_scale's small-heap
pipeline) 48 instead of 61. The three JDK oracle modules take 24 CPU-seconds instead of 31 (``javac`` alone
1.6 instead of 2.8). C1 alone also shrinks the code cache to 48 MB (tiered compilation's default is 240 MB):
the Spark session, which runs every job of the session's tests, filled it, and its sweeper threw compiled code
away for C1 to compile again (Spark session's tests, JVM threads: C1 21 and the sweeper 4.4 CPU-seconds; with
240 MB, C1 13.7 and the sweeper none; the tests' whole CPU time 136 and 135 CPU-seconds against 145-153).
The bytecode verifier is off for the classes of the suite's own class loaders (``-XX:-BytecodeVerificationRemote``,
a diagnostic option; the JDK's own classes are never verified): the JVMs run the same trusted jars (Spark's,
the oracles compiled here) every time, and Spark also loads the classes it generates for each query through
such a loader. Measured here, CPU-seconds with and without: the Spark session's tests 108 against 125-127,
test_spark_scale 119 against 132-136, the three JDK oracle modules 18.2 against 20.1.
No option changes what a JVM computes: only when and how its code is compiled and checked and its heap
collected. Users' JVMs keep the JDK's defaults."""

from __future__ import annotations

SUITE_JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"
    " -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
)
#: for ``java``: the options as arguments
JAVA_OPTIONS = SUITE_JVM_OPTIONS.split()
#: for ``javac``, which hands its own JVM the options given with ``-J``
JAVAC_OPTIONS = [f"-J{option}" for option in JAVA_OPTIONS]
