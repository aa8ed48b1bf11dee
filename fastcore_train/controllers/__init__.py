"""The framework-neutral controller: Trainer, Evaluator and the trainer state."""
