"""The fastcore_train Trainer against each framework's own hand loop on three real workloads.

For ``--backend`` torch, paddle, jittor or oneflow and ``--model`` cnn, transformer or loader
(``bench/hands/workloads.py``): the pytorch/examples MNIST CNN (with dropout) on the shipped digits
upscaled to 28x28, the 2-block transformer classifier of ``examples/text_classification`` on random
tokens, and a data-bound run (2 loader workers doing ~1 ms of numpy per sample, a small MLP).
Each is trained on the same data, through the framework's own loader (``bench/hands/<backend>.py``),
from the same initial weights, by the framework's idiomatic hand loop, by a second hand loop (the
A/A control: the noise floor) and by ``Trainer(..., progress_bar=None)``, in interleaved rounds of
one epoch of ``--batches`` batches (``bench/_rounds.py``). Every epoch of every contender starts
from the same framework seed, so dropout draws the same numbers wherever the framework lets it.

Reported per model: the table of ``bench/overhead.py``, ``trainer/hand`` against the 1.03 target
(PASS/MISS), the per-batch ratio apart from the fixed costs of a ``run()`` and of an epoch's start
(from extra rounds of one batch: ``hand@1``, ``trainer@1``, and two epochs of one batch), and whether
the weights ended bit-identical; where the Trainer's per-step reseed
(jittor, oneflow: for exact resume) makes dropout draw other numbers, a short run with dropout
off checks the rest of the arithmetic is the same. It is a measurement, not a test: exit status 0.

    python bench/models.py [--backend torch] [--model all] [--rounds 7] [--batches N] [--threads 1] [--profile]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import _rounds  # noqa: E402
from bench.hands import BACKENDS  # noqa: E402
from bench.hands import workloads  # noqa: E402
from bench.overhead import TARGET, make_trainer_epoch, profile_trainer, same_weights, set_thread_env  # noqa: E402

SEED = 0
DEFAULT_BATCHES = workloads.DEFAULT_BATCHES


def build(hands: Any, workload: workloads.Workload, batches: int, dropout: bool = True
          ) -> tuple[Callable[[], Any], Callable[[], tuple[Any, Any]]]:
    """Factories of fresh loaders (same samples) and of fresh models with their optimizers (same weights)."""
    loader = hands.make_loader(workloads.columns(workload, batches, SEED), workload.batch_size, workload.workers,
                               workload.transform)

    def model_and_optimizer() -> tuple[Any, Any]:
        model = hands.build_model(workload, SEED, dropout)
        return model, hands.make_optimizer(workload.optimizer, model, workload.lr)
    return loader, model_and_optimizer


def seeded(hands: Any, epoch: Callable[[], None]) -> Callable[[], None]:
    """``epoch`` after the framework's seed is set: every contender's epoch draws from the same stream."""
    def run() -> None:
        hands.seed(SEED)
        epoch()
    return run


def contenders_for(hands: Any, workload: workloads.Workload, batches: int, dropout: bool = True,
                   extra: dict[str, dict[str, Any]] | None = None
                   ) -> tuple[dict[str, Callable[[], None]], dict[str, Any], Any, Any]:
    """hand, hand-again (A/A), trainer and ``extra`` (name: Trainer options) epochs over fresh
    loaders and models; also the models, the hand loader and the Trainer."""
    extra = extra or {}
    loader, model_and_optimizer = build(hands, workload, batches, dropout)
    models = {name: model_and_optimizer() for name in ("hand", "hand-again", "trainer", *extra)}
    hand_loader = loader()
    epochs = {name: hands.hand_epoch(data, *models[name], workload.loss, workload.keys)
              for name, data in (("hand", hand_loader), ("hand-again", loader()))}
    trainer, epochs["trainer"] = make_trainer_epoch(hands, loader(), *models["trainer"], None, model_summary=False)
    for name, options in extra.items():
        _, epochs[name] = make_trainer_epoch(hands, loader(), *models[name], None, model_summary=False, **options)
    return {name: seeded(hands, epoch) for name, epoch in epochs.items()}, models, hand_loader, trainer


def fixed_cost_contenders(hands: Any, workload: workloads.Workload) -> dict[str, Callable[[], None]]:
    """Runs of one batch, to take the fixed costs apart from the per-batch ones: ``hand@1`` and
    ``trainer@1`` (one epoch of one batch: a ``run()``), ``hand@1x2`` and ``trainer@1x2`` (two
    epochs of one batch: one more epoch start)."""
    from fastcore_train import Trainer

    loader, model_and_optimizer = build(hands, workload, 1)
    runs: dict[str, Callable[[], None]] = {}
    model, optimizer = model_and_optimizer()
    hand = hands.hand_epoch(loader(), model, optimizer, workload.loss, workload.keys)
    runs["hand@1"] = hand
    model, optimizer = model_and_optimizer()
    twice = hands.hand_epoch(loader(), model, optimizer, workload.loss, workload.keys)
    runs["hand@1x2"] = lambda: (twice(), twice())
    for name, epochs in (("trainer@1", 1), ("trainer@1x2", 2)):
        model, optimizer = model_and_optimizer()
        trainer = Trainer(model=model, train_dataloader=loader(), optimizers=optimizer, n_epochs=epochs,
                          progress_bar=None, model_summary=False, **hands.TRAINER_KWARGS)

        def run(trainer: Any = trainer) -> None:
            trainer.state.cur_epoch_idx = 0  # the same Trainer again, as the N-batch rounds reuse theirs
            trainer.run(num_eval_sanity_batch=0)
        runs[name] = run
    return {name: seeded(hands, epoch) for name, epoch in runs.items()}


def fixed_costs(walls: dict[str, list[float]], batches: int) -> dict[str, float]:
    """Per-batch ratio and the Trainer's fixed costs (ms) from the medians of the rounds.

    With N batches a round costs fixed + N x per-batch: the N-batch and 1-batch runs give each
    contender's per-batch cost, the 1-batch runs then its fixed cost of a ``run()`` (one epoch
    start included), and the 2-epoch 1-batch runs the cost of one more epoch start.
    """
    import statistics
    med = {name: statistics.median(times) for name, times in walls.items()}
    per_batch = {who: (med[who] - med[f"{who}@1"]) / max(1, batches - 1) for who in ("hand", "trainer")}
    fixed = {who: med[f"{who}@1"] - per_batch[who] for who in ("hand", "trainer")}
    epoch = {who: med[f"{who}@1x2"] - med[f"{who}@1"] - per_batch[who] for who in ("hand", "trainer")}
    return {"per_batch_ratio": per_batch["trainer"] / per_batch["hand"] if per_batch["hand"] > 0 else float("nan"),
            "run_ms": 1e3 * (fixed["trainer"] - fixed["hand"]), "epoch_ms": 1e3 * (epoch["trainer"] - epoch["hand"]),
            "hand_batch_ms": 1e3 * per_batch["hand"]}


def loader_line(hands: Any, loader: Any) -> str:
    """A loader's class, batch sampler and worker processes (the Trainer's should keep the workers)."""
    return (f"{type(loader).__name__} (batch sampler {type(getattr(loader, 'batch_sampler', None)).__name__}, "
            f"workers {hands.loader_workers(loader)})")


def unequal_to_hand(hands: Any, models: dict[str, Any]) -> list[str]:
    return [name for name in models if not same_weights(hands, models["hand"][0], models[name][0])]


def dropout_off_check(hands: Any, workload: workloads.Workload, batches: int, epochs: int = 1) -> bool:
    """Trainer and hand loop with dropout off, ``epochs`` epochs each: bit-identical weights?"""
    contenders, models, _, _ = contenders_for(hands, workload, batches, dropout=False)
    for _ in range(epochs):
        for name in ("hand", "trainer"):
            contenders[name]()
            hands.finish()
    return not unequal_to_hand(hands, {name: models[name] for name in ("hand", "trainer")})


def race(hands: Any, args: argparse.Namespace, name: str) -> dict[str, Any]:
    """One model's interleaved rounds; prints its table and verdict lines, returns the figures."""
    workload = workloads.get(name)
    batches = args.batches or DEFAULT_BATCHES[name]
    draws = workload.name == "cnn"  # the only workload with dropout
    # Backend options worth a line of their own where the model draws random numbers (oneflow: no reseed).
    extra = getattr(hands, "DROPOUT_TRAINERS", {}) if draws else {}
    contenders, models, hand_loader, trainer = contenders_for(hands, workload, batches, extra=extra)
    if batches > 1:
        contenders.update(fixed_cost_contenders(hands, workload))
    walls, cpus, threads = _rounds.interleave(contenders, args.rounds, args.warmup, hands.finish)
    unequal = unequal_to_hand(hands, models)
    fair = "trainer" not in unequal and "hand-again" not in unequal
    note = getattr(hands, "DROPOUT_NOTE", "") if draws else ""

    print(f"\n[{name}] {workloads.describe(workload)}; {batches} batches/round, {args.rounds} rounds "
          f"(+{args.warmup} warm-up)")
    if workload.transform is not None:
        print(f"[{name}] per-sample work in __getitem__: {workloads.per_sample_ms(workload):.2f} ms "
              "(in this process)")
    print(f"[{name}] hand loader: {loader_line(hands, hand_loader)}; Trainer's loader: {loader_line(hands, trainer.dataloader)}")
    _rounds.print_table(walls, cpus, batches, threads=threads)
    control = _rounds.ratio_line("hand-again", walls, batches, note="(A/A control: the noise floor)")
    ratio = _rounds.ratio_line("trainer", walls, batches)
    for extra_name in extra:
        _rounds.ratio_line(extra_name, walls, batches)
    off = None
    if note and "trainer" in unequal and "hand-again" not in unequal:
        off = dropout_off_check(hands, workload, min(batches, 8))
    costs = fixed_costs(walls, batches) if batches > 1 else None
    if costs is not None:
        print(f"[{name}] per batch trainer/hand {costs['per_batch_ratio']:.3f} (hand {costs['hand_batch_ms']:.1f} ms a "
              f"batch); the Trainer's fixed cost over the hand loop's: {costs['run_ms']:+.2f} ms a run(), "
              f"{costs['epoch_ms']:+.2f} ms an epoch start")
    print(f"[{name}] A/A control hand-again/hand (median of {args.rounds} rounds): {control:.3f}")
    print(f"[{name}] trainer/hand (median of {args.rounds} rounds): {ratio:.3f}  target <= {TARGET:.2f}  "
          f"{'PASS' if ratio <= TARGET else 'MISS'}")
    verdict = ("yes" if fair else "NO") + (f" ({', '.join(unequal)} differ{': ' + note if note and not fair else ''})"
                                           if unequal else "")
    print(f"[{name}] bit-identical weights (trainer vs hand): {verdict}")
    if off is not None:
        print(f"[{name}] bit-identical weights with dropout off (trainer vs hand): {'yes' if off else 'NO'}")
    if args.profile:
        profile_trainer(contenders["trainer"], batches)
    return {"ratio": ratio, "control": control, "fair": fair, "dropout_off_fair": off, "costs": costs}


def parse_args(argv: Any) -> argparse.Namespace:
    parser = _rounds.bench_parser(__doc__.split("\n\n")[0], BACKENDS, rounds=7)
    parser.add_argument("--model", choices=(*workloads.WORKLOADS, "all"), default="all",
                        help="workload (default all three)")
    parser.add_argument("--batches", type=int, default=0,
                        help="batches per round = one epoch (default per model: "
                             + ", ".join(f"{k} {v}" for k, v in DEFAULT_BATCHES.items()) + ")")
    parser.add_argument("--threads", type=int, default=1, help="framework compute threads (default 1)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed warm-up epochs per contender (default 1)")
    parser.add_argument("--profile", action="store_true", help="also cProfile one Trainer epoch per model")
    args = parser.parse_args(argv)
    _rounds.require_at_least(parser, args, 1, ("rounds", "threads"))
    _rounds.require_at_least(parser, args, 0, ("warmup", "batches"))
    return args


def main(argv: Any = None) -> int:
    args = parse_args(argv)
    set_thread_env(args.backend, args.threads)
    from bench.hands import load
    hands = load(args.backend)
    hands.configure(args.threads)
    names = workloads.WORKLOADS if args.model == "all" else (args.model,)
    print(f"fastcore_train on real models ({args.backend}): {', '.join(names)}; {args.backend} {hands.version()}, "
          f"threads {args.threads}, python {sys.version.split()[0]}")
    results = {name: race(hands, args, name) for name in names}
    print()
    for name, result in results.items():
        print(f"summary [{name}]: trainer/hand {result['ratio']:.3f} "
              f"({'PASS' if result['ratio'] <= TARGET else 'MISS'}), A/A {result['control']:.3f}, "
              f"bit-identical {'yes' if result['fair'] else 'no'}"
              + ("" if result["costs"] is None else
                 f"; per batch {result['costs']['per_batch_ratio']:.3f}, fixed {result['costs']['run_ms']:+.2f} ms a "
                 f"run(), {result['costs']['epoch_ms']:+.2f} ms an epoch start")
              + ("" if result["dropout_off_fair"] is None else
                 f" (dropout off: {'yes' if result['dropout_off_fair'] else 'no'})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
