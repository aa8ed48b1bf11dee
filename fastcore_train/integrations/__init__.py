"""Running fastcore_train inside engines that start the processes themselves (Ray Train).

Each integration imports its engine only when its own module is imported
(``fastcore_train.integrations.ray``), so ``import fastcore_train`` needs none of them. This part
sits above the controllers and callbacks and imports nothing from the backends: a backend's
launcher variables come from the driver registry's table (``BackendEntry.launch_environment``).
"""
