"""The demo application: ``python -m fastcore_train demo`` (:mod:`.run`) trains the shipped digits
with any backend, and :mod:`.config` names the same task for ``fastcore-train fit`` config files.

It sits on top of the package (it builds a Trainer); the task it trains, the same for every
backend, is :mod:`fastcore_train.data.digits_task`, which the backends build in their frameworks.
"""
from fastcore_train.demo.run import add_demo_arguments, main_demo, parse_device, run_demo, trend_line

__all__ = ["add_demo_arguments", "main_demo", "parse_device", "run_demo", "trend_line"]
