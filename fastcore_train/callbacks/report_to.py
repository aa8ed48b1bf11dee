"""``report_to``'s names, at home in :mod:`fastcore_train.controllers.report_to` (a Trainer option
that loads the callbacks it names by module path, as the driver registry loads backends)."""
from fastcore_train.controllers.report_to import REPORTERS, report_callbacks, report_names

__all__ = ["REPORTERS", "report_callbacks", "report_names"]
