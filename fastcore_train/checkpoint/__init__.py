"""Checkpoints, written once for every backend: the folder layout and its file names (:mod:`.layout`),
writing one (:mod:`.writing`, through :mod:`.staging`, its JSON files by :mod:`.json_files`), reading
one back (:mod:`.reading`), where one may be written (:mod:`.target`), the checksums that guard it
(:mod:`.checksums`), its errors (:mod:`.errors`), finding the newest to resume (:mod:`.resume`), and
asynchronous writes (:mod:`.async_writer`, imported on its own).

The names users and the rest of the package use are re-exported here, so
``from fastcore_train.checkpoint import CheckpointError`` and ``checkpoint.write_checkpoint``
read as before the subpackage existed.
"""
from fastcore_train.checkpoint.checksums import (ALGORITHM, ALGORITHM_KEY, META_FILE, Verification, file_checksums,
                                                 verify_checksums, write_hashed)
from fastcore_train.checkpoint.errors import (CheckpointChecksumError, CheckpointError, CheckpointStateError,
                                              CheckpointTargetError)
from fastcore_train.checkpoint.json_files import encode_callback_states, json_text, write_json, write_text
from fastcore_train.checkpoint.layout import (CALLBACK_STATE_FILE, FORMAT_VERSION, LEGACY_CALLBACK_STATE_FILE,
                                              LR_POSITION, MODEL_STEM, OPTIMIZERS_KEY, RANK_STATE_FILE,
                                              READABLE_FORMATS, TRAINER_STATE_FILE, TRAINING_STATE_STEM, FILES_KEY,
                                              META_CHECKSUM_KEY, model_file)
from fastcore_train.checkpoint.meta import load_meta, meta_digest, sealed_meta
from fastcore_train.checkpoint.reading import (read_callback_states, read_meta, read_rank_random_state,
                                               read_trainer_state, require_file)
from fastcore_train.checkpoint.staging import staged_path, write_model_file
from fastcore_train.checkpoint.user_files import remove_checkpoint, user_files
from fastcore_train.checkpoint.writing import (CheckpointContent, check_snapshot_options, checkpoint_content,
                                               keep_user_files, write_checkpoint)
from fastcore_train.checkpoint.target import (check_checkpoint_target, checkpoint_target_problem,
                                              concurrent_writer_problem, is_checkpoint_folder)

__all__ = [
    "ALGORITHM", "ALGORITHM_KEY", "CALLBACK_STATE_FILE", "FORMAT_VERSION", "LEGACY_CALLBACK_STATE_FILE", "LR_POSITION",
    "META_FILE", "FILES_KEY", "META_CHECKSUM_KEY", "MODEL_STEM", "OPTIMIZERS_KEY", "RANK_STATE_FILE", "READABLE_FORMATS", "TRAINER_STATE_FILE",
    "TRAINING_STATE_STEM", "Verification", "CheckpointChecksumError", "CheckpointContent", "CheckpointError", "CheckpointStateError",
    "CheckpointTargetError", "check_checkpoint_target", "check_snapshot_options", "checkpoint_content",
    "checkpoint_target_problem", "concurrent_writer_problem", "encode_callback_states", "file_checksums",
    "is_checkpoint_folder", "json_text", "keep_user_files", "remove_checkpoint", "user_files", "load_meta", "meta_digest", "sealed_meta", "model_file", "read_callback_states", "read_meta", "read_rank_random_state",
    "read_trainer_state", "require_file", "staged_path", "verify_checksums", "write_checkpoint", "write_hashed",
    "write_json", "write_model_file", "write_text",
]
