"""Driver conformance: events fire in the documented order and counts, with every/once/filter_fn."""
from __future__ import annotations

import pytest

from fastcore_train import Accuracy, Callback, Event, Trainer
from fastcore_train.events.event import EVENT_SIGNATURES
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import make_trainer

BATCH_EVENTS = ["on_fetch_data_begin", "on_fetch_data_end", "on_train_batch_begin", "on_before_backward",
                "on_after_backward", "on_before_optimizers_step", "on_after_optimizers_step",
                "on_before_zero_grad", "on_after_zero_grad", "on_train_batch_end"]


class Recorder(Callback):
    """Records the name of every event it receives."""

    def __init__(self) -> None:
        self.seen: list[str] = []


for _name in EVENT_SIGNATURES:
    def _record(self, trainer, *args, _name=_name):
        self.seen.append(_name)
    setattr(Recorder, _name, _record)


def test_events_fire_in_documented_order_with_documented_counts(harness, tmp_path):
    x, y = make_data(16)
    recorder = Recorder()
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y, n_epochs=2, callbacks=[recorder],
                           evaluate_dataloaders=harness.make_dataloader(x, y, 8), metrics={"acc": Accuracy()},
                           evaluate_input_mapping={"y": "target"})
    trainer.run(num_eval_sanity_batch=1)
    epoch = ["on_train_epoch_begin"] + BATCH_EVENTS * 2 + ["on_train_epoch_end", "on_evaluate_begin",
                                                             "on_evaluate_end"]
    expected = (["on_after_trainer_initialized", "on_sanity_check_begin", "on_sanity_check_end", "on_train_begin"]
                + epoch * 2 + ["on_train_end"])
    assert recorder.seen == expected

    trainer.save_model(tmp_path)
    trainer.load_model(tmp_path)
    trainer.save_checkpoint(tmp_path / "ckpt")
    trainer.load_checkpoint(tmp_path / "ckpt")
    assert recorder.seen[len(expected):] == ["on_save_model", "on_load_model", "on_save_checkpoint",
                                             "on_load_checkpoint"]


def test_accumulation_fires_step_events_once_per_group(harness):
    x, y = make_data(32)
    recorder = Recorder()
    make_trainer(harness, harness.make_model(initial_weights()), x, y, callbacks=[recorder],
                 accumulation_steps=2).run(num_eval_sanity_batch=0)
    assert recorder.seen.count("on_before_backward") == 4
    assert recorder.seen.count("on_after_optimizers_step") == 2
    assert recorder.seen.count("on_after_zero_grad") == 2


def test_every_once_and_filter_fn(harness):
    x, y = make_data(48)
    fired: dict[str, list[int]] = {"every": [], "once": [], "filter": [], "plain": []}
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y)
    trainer.add_callback_fn(Event.on_train_batch_end(every=2), lambda t: fired["every"].append(t.global_forward_batches))
    trainer.add_callback_fn(Event.on_train_batch_end(once=4), lambda t: fired["once"].append(t.global_forward_batches))
    filters = []

    def odd_calls(event_filter, t):
        filters.append(event_filter)
        return event_filter.num_called % 2 == 1 and t.global_forward_batches > 2

    trainer.add_callback_fn(Event.on_train_batch_end(filter_fn=odd_calls),
                            lambda t: fired["filter"].append(t.global_forward_batches))
    trainer.add_callback_fn(Event.on_train_batch_end(), lambda t: fired["plain"].append(t.global_forward_batches))
    trainer.run(num_eval_sanity_batch=0)
    assert fired == {"every": [2, 4, 6], "once": [4], "filter": [3, 5], "plain": [1, 2, 3, 4, 5, 6]}
    assert filters[-1].num_called == 6 and filters[-1].num_executed == 2


def test_event_rejects_more_than_one_gate():
    with pytest.raises(ValueError, match="at most one of every, once and filter_fn"):
        Event.on_train_batch_end(every=2, once=1)


def test_trainer_on_markers(harness):
    x, y = make_data(8)
    calls: list[str] = []

    @Trainer.on(Event.on_train_begin())
    def for_next_trainer(trainer):
        calls.append("next")

    @Trainer.on(Event.on_train_begin(), marker="special")
    def for_special(trainer):
        calls.append("special")

    make_trainer(harness, harness.make_model(initial_weights()), x, y).run(num_eval_sanity_batch=0)
    assert calls == ["next"]
    make_trainer(harness, harness.make_model(initial_weights()), x, y).run(num_eval_sanity_batch=0)
    assert calls == ["next"], "an unmarked function belongs to the next Trainer only"
    make_trainer(harness, harness.make_model(initial_weights()), x, y, marker="special").run(num_eval_sanity_batch=0)
    assert calls == ["next", "special"]
    Trainer._custom_callbacks.pop("special")


def test_listener_with_wrong_signature_fails_at_registration(harness):
    with pytest.raises(TypeError, match=r"must accept \(trainer, results\)"):
        Trainer.on(Event.on_evaluate_end())(lambda trainer: None)


def test_callback_state_and_filter_counters_survive_a_checkpoint(harness, tmp_path):
    x, y = make_data(32)

    class Counter(Callback):
        def __init__(self):
            self.batches = 0

        def on_train_batch_end(self, trainer):
            self.batches += 1

        def on_save_checkpoint(self, trainer):
            return {"batches": self.batches}

        def on_load_checkpoint(self, trainer, states):
            self.batches = states["batches"]

    fired = []
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y, callbacks=[Counter()])
    trainer.add_callback_fn(Event.on_train_batch_end(every=3), lambda t: fired.append(t.global_forward_batches))
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    assert fired == [3]

    counter = Counter()
    resumed = make_trainer(harness, harness.make_model(initial_weights()), x, y, callbacks=[counter], n_epochs=2)
    resumed.add_callback_fn(Event.on_train_batch_end(every=3), lambda t: fired.append(t.global_forward_batches))
    resumed.run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")
    assert counter.batches == 8
    assert fired == [3, 6], "the every=3 counter continued from 4 calls, so it fires on the 6th"


def test_on_exception_fires_and_the_error_propagates(harness):
    x, y = make_data(16)
    seen = []

    class Boom(Callback):
        def on_train_batch_end(self, trainer):
            raise RuntimeError("boom")

        def on_exception(self, trainer, exception):
            seen.append(exception)

    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y, callbacks=[Boom()])
    with pytest.raises(RuntimeError, match="boom"):
        trainer.run(num_eval_sanity_batch=0)
    assert len(seen) == 1 and str(seen[0]) == "boom"


def test_keyboard_interrupt_is_caught_when_asked(harness):
    x, y = make_data(16)

    class Interrupt(Callback):
        def on_train_batch_end(self, trainer):
            raise KeyboardInterrupt

    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y, callbacks=[Interrupt()])
    trainer.run(num_eval_sanity_batch=0, catch_KeyboardInterrupt=True)
    assert trainer.global_forward_batches == 1
    with pytest.raises(KeyboardInterrupt):
        trainer.run(num_eval_sanity_batch=0, catch_KeyboardInterrupt=False)
