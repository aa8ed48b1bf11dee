"""Experiment trackers as metric-log callbacks: MLflow, Weights & Biases (offline), SwanLab.

Each writes what every :class:`~fastcore_train.callbacks.metric_log.MetricLogCallback` writes
(the training loss every ``log_every_n_batches`` batches, each evaluation's results), from rank 0
only, and keeps its run's id in checkpoints so a resumed training continues the same run.
Trackers are imported when built, so an uninstalled one costs nothing until named. What they
share is :class:`~fastcore_train.callbacks.trackers.run_tracker.RunTrackerCallback`.
"""
