"""One module per benchmark group, named as the group (``pipeline-scale`` → ``pipeline_scale.py``); each
has ``run(bench)``, which measures and adds its rows to the :class:`~kip714.tools.bench.harness.Bench`.
:mod:`kip714.tools.bench.registry` lists them and imports one only when it runs."""
