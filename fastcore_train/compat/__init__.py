"""Adapters that keep another trainer's API (its parameters and their meaning) over our Trainer:
:mod:`~fastcore_train.compat.fastnlp0` for fastNLP 0.x's ``DistTrainer``."""
