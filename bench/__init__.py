"""``make bench``: benchmarks of the mesh and the cost model built on them. Run as ``python -m bench``.

One module per measurement, each with a ``run()`` returning plain data: :mod:`bench.overhead` (layer CPU per
envelope, AWS in memory), :mod:`bench.traffic` (every AWS request of the example flow, metered and billed),
:mod:`bench.latency` (hop latency, end to end over SSE, throughput, moto's own rate), :mod:`bench.coldstart` (import
time), :mod:`bench.memory` (peak RSS). :mod:`bench.cost` prices the traffic with ``prices.toml``;
:mod:`bench.targets`, :mod:`bench.report` and :mod:`bench.findings` turn the results into ``REPORT.md``. Support:
:mod:`bench.meter` (botocore hooks), :mod:`bench.units` (billing rules), :mod:`bench.fakes` (in-memory AWS),
:mod:`bench.meshes` (the example mesh), :mod:`bench.stats`, :mod:`bench.handlers`. Nothing here runs in
``make test``; the pure parts are unit-tested, and the request vectors (:mod:`bench.vectors`, counted with
:mod:`bench.drive` and :mod:`bench.keyclass`) are recounted there. ``make capacity`` (:mod:`bench.capacity`) and
``make calibrate`` (:mod:`bench.calibrate`) run the capacity model (``asya.capacity``).
"""

from __future__ import annotations

__all__: list[str] = []
