"""Driver conformance: training through the Trainer equals the framework's own hand-written loop."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import (assert_weights_close, assert_weights_equal, batches_of,
                                       make_trainer)


def test_sgd_steps_are_bit_identical_to_hand_written_loop(harness):
    x, y = make_data(48)
    trained = harness.make_model(initial_weights())
    make_trainer(harness, trained, x, y, batch_size=8, lr=0.1, n_epochs=2).run(num_eval_sanity_batch=0)

    reference = harness.make_model(initial_weights())
    optimizer = harness.make_sgd(reference, 0.1)
    harness.hand_train(reference, optimizer, batches_of(x, y, 8) * 2)

    assert not np.array_equal(harness.get_weights(trained)["w1"], initial_weights()["w1"]), "training did nothing"
    assert_weights_equal(harness.get_weights(trained), harness.get_weights(reference))


def test_several_optimizers_all_step(harness):
    x, y = make_data(16)
    weights = initial_weights()
    model = harness.make_model(weights)
    params = harness.get_weights(model)
    first = harness.make_sgd(model, 0.1)
    second = harness.make_sgd(model, 0.1)
    trainer = make_trainer(harness, model, x, y, optimizers=[first, second])
    assert trainer.optimizers == [first, second]
    trainer.run(num_eval_sanity_batch=0)
    # Both optimizers own every parameter, so each step applies the update twice.
    reference = harness.make_model(weights)
    optimizer = harness.make_sgd(reference, 0.2)
    harness.hand_train(reference, optimizer, batches_of(x, y, 8))
    assert_weights_close(harness.get_weights(model), harness.get_weights(reference))
    assert not np.array_equal(harness.get_weights(model)["w2"], params["w2"])


def test_accumulation_matches_one_larger_batch(harness):
    x, y = make_data(32)
    accumulated = harness.make_model(initial_weights())
    make_trainer(harness, accumulated, x, y, batch_size=8, accumulation_steps=4).run(num_eval_sanity_batch=0)

    reference = harness.make_model(initial_weights())
    harness.hand_train(reference, harness.make_sgd(reference, 0.1), [(x, y)])
    assert_weights_close(harness.get_weights(accumulated), harness.get_weights(reference))


def test_accumulation_steps_at_epoch_end_with_a_partial_group(harness):
    """Batches 1-2 form one group, batch 3 is alone at the epoch's end and still steps."""
    x, y = make_data(24)
    model = harness.make_model(initial_weights())
    steps = []
    from fastcore_train import Event
    trainer = make_trainer(harness, model, x, y, batch_size=8, accumulation_steps=2)
    trainer.add_callback_fn(Event.on_after_optimizers_step(), lambda t, optimizers: steps.append(t.batch_idx_in_epoch))
    trainer.run(num_eval_sanity_batch=0)
    assert steps == [1, 2]  # batch_idx_in_epoch counts batches done before the current one


def test_n_batches_stops_training_early(harness):
    x, y = make_data(48)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, batch_size=8, n_batches=9)
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 9
    assert trainer.n_epochs == 2

    reference = harness.make_model(initial_weights())
    harness.hand_train(reference, harness.make_sgd(reference, 0.1), (batches_of(x, y, 8) * 2)[:9])
    assert_weights_equal(harness.get_weights(model), harness.get_weights(reference))


def test_num_train_batch_per_epoch_caps_each_epoch(harness):
    x, y = make_data(48)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, batch_size=8, n_epochs=2)
    trainer.run(num_train_batch_per_epoch=2, num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 4


def test_input_mapping_renames_batch_keys(harness):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    renamed = make_trainer(harness, model, x, y, input_mapping={"y": "target"})
    with pytest.raises(ValueError, match=r"needs the parameter\(s\) \['y'\].*input_mapping"):
        renamed.run(num_eval_sanity_batch=0)

    model = harness.make_model(initial_weights())
    make_trainer(harness, model, x, y, input_mapping=lambda batch: {"x": batch["x"], "y": batch["y"]}).run(
        num_eval_sanity_batch=0)
    reference = harness.make_model(initial_weights())
    harness.hand_train(reference, harness.make_sgd(reference, 0.1), batches_of(x, y, 8))
    assert_weights_equal(harness.get_weights(model), harness.get_weights(reference))


def test_output_mapping_applies_to_training_outputs(harness):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, output_mapping={"loss": "objective"})
    with pytest.raises(KeyError, match=r"no 'loss' entry.*\['objective'\].*output_mapping"):
        trainer.run(num_eval_sanity_batch=0)


def test_custom_batch_step_fn_uses_trainer_primitives(harness):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    calls = []

    def batch_step(trainer, batch):
        calls.append(trainer.batch_idx_in_epoch)
        outputs = trainer.train_step(batch)
        trainer.backward(outputs)
        trainer.step()
        trainer.zero_grad()

    make_trainer(harness, model, x, y, batch_step_fn=batch_step).run(num_eval_sanity_batch=0)
    reference = harness.make_model(initial_weights())
    harness.hand_train(reference, harness.make_sgd(reference, 0.1), batches_of(x, y, 8))
    assert calls == [0, 1]
    assert_weights_equal(harness.get_weights(model), harness.get_weights(reference))
