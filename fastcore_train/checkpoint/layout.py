"""The checkpoint folder layout, written once for every backend.

A checkpoint is a folder::

    meta.json            format version, backend, driver, world size, package version, the list
                         and the checksum of every other file of the checkpoint (checked when it is
                         loaded), and the checksum of its own content (see meta.py)
    model<suffix>        the model, written by the driver (or by a user's model_save_fn)
    training_state<suffix>  optimizers and grad scaler, written by the driver
    trainer_state.json   trainer counters, sampler state, event-filter counters, RNG states
    callback_states.json what each Callback returned from on_save_checkpoint (JSON, see
                         :mod:`fastcore_train.utils.json_state`; format 1 pickled it)

The folder is written under a temporary name and renamed into place, so a process killed
mid-write leaves the previous checkpoint complete and loadable. Once in place, it is flushed to
disk (every file and folder fsynced) by the trainer's background writer, and only then is the
previous checkpoint at that name deleted: a power cut before the flush leaves the previous one
beside it (``<name>.old-*``), so the training thread does not wait for the disk. Only a folder that is itself a
checkpoint (it has our ``meta.json``) or an empty folder is ever replaced: anything else at the
target is the user's, and saving there is an error that leaves it untouched.

``meta.json`` is written last, once every file is in the temporary folder, with the checksum of
each of them (:mod:`~fastcore_train.checkpoint.checksums`: XXH3-128, computed while writing where
the framework saves to a file object) (folders, such as oneflow's model folder, file by file); loading checks them first,
so a file changed or damaged after saving is an error naming it, not weights loaded silently.

Loading runs no code of the checkpoint's: the JSON files are parsed, the framework files are
read by the driver's safe loaders (``driver.io``), and a format-1 ``callback_states.pkl`` through
:mod:`fastcore_train.utils.safe_pickle`, which rebuilds plain data only.
"""
from __future__ import annotations

from pathlib import Path

from fastcore_train.drivers.driver import Driver

#: 5: meta.json lists its files and carries the checksum of its own content (see meta.py).
#: 4: XXH3-128 checksums (``checksum_algorithm`` in meta.json). 3: a random-state file per rank.
#: 2: callback states in JSON. 1: pickled (still read, through the restricted unpickler).
FORMAT_VERSION = 5
READABLE_FORMATS = (1, 2, 3, 4, 5)
#: The file that holds the checkpoint's metadata and the checksums of its other files.
META_FILE = "meta.json"
#: ``meta.json``'s key naming the checksum algorithm; absent in checkpoints of format < 4 (sha256).
ALGORITHM_KEY = "checksum_algorithm"
ALGORITHM = "xxh3_128"
#: ``meta.json``'s list of the checkpoint's files (format 5 on): the names its checksums cover.
FILES_KEY = "files"
#: ``meta.json``'s checksum of its own content (format 5 on).
META_CHECKSUM_KEY = "meta_checksum"
TRAINER_STATE_FILE = "trainer_state.json"
CALLBACK_STATE_FILE = "callback_states.json"
LEGACY_CALLBACK_STATE_FILE = "callback_states.pkl"
MODEL_STEM = "model"
TRAINING_STATE_STEM = "training_state"
#: Each rank's random state (format 3 on), written by that rank: see utils/rank_state.py.
RANK_STATE_FILE = "rank_state_{rank:05d}.npz"
#: ``meta.json``'s record of the optimizer classes (checked on resume, read by ``convert``).
OPTIMIZERS_KEY = "optimizers"
#: The key under which ``LRSchedCallback``'s state records the scheduler's position (read by ``convert``).
LR_POSITION = "__lr_position__"


def model_file(folder: Path, driver: Driver) -> Path:
    """``folder/model<suffix>``: where the driver's model file of a checkpoint (or saved model) is."""
    return folder / f"{MODEL_STEM}{driver.io.model_file_suffix}"
