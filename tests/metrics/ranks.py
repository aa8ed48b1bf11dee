"""Running ``Metric.aggregate`` on several metric objects as if each were one rank of a job."""
import copy


def aggregate_ranks(*metrics):
    """Call ``aggregate`` on every metric with an all-gather returning every rank's elements in rank order.

    The gather is the documented ``all_gather_object`` contract (one entry per rank), not a
    stand-in for a framework: the elements are plain numbers and numpy arrays.
    """
    snapshots = [copy.deepcopy(dict(metric.elements)) for metric in metrics]
    for rank, metric in enumerate(metrics):
        def all_gather_object(local, rank=rank):
            return [local if other == rank else snapshot for other, snapshot in enumerate(snapshots)]
        metric.aggregate(all_gather_object)
