"""`python -m tests.bench.serve --service X --port P`: the real entry point, for the benchmark.

Identical to `python -m shared.runtime.main`, except that while the assembly service's builder
still takes `(settings, openviking_client)` instead of the runtime's `ServiceContext`, it is
adapted here (and the adaptation is logged) so the benchmark can run during that transition.
"""

from __future__ import annotations

import inspect
import logging

from shared.runtime import main as runtime_main

_original = runtime_main._builders


def _adapted_builders():  # type: ignore[no-untyped-def]
    builders = _original()
    assembly = builders["assembly"]
    params = list(inspect.signature(assembly).parameters)
    if params[:2] == ["settings", "openviking_client"]:
        logging.getLogger("bench").warning("bench: adapting build_assembly_service(settings, client)")

        def build(context):  # type: ignore[no-untyped-def]
            return assembly(context.settings, context.openviking)

        builders["assembly"] = build
    return builders


runtime_main._builders = _adapted_builders  # type: ignore[assignment]

if __name__ == "__main__":
    runtime_main.main()
