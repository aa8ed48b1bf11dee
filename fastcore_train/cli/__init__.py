"""``fastcore-train fit --config run.yaml``: train from a config file (parsing by jsonargparse)."""
