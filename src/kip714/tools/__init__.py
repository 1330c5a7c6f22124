"""Tools built on the library: ``simulate`` (fleets of clients), ``bench`` (every hot path against its peer)
and ``demo``. The library never imports this package; only ``kip714.cli`` does, lazily."""

import pathlib

#: Real PushTelemetry frames captured from librdkafka clients, shipped with the package.
SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"
