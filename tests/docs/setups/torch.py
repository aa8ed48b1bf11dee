"""The torch examples' givens: the demo MLP on a slice of the digits, its dataloaders and Adam."""
import torch

from fastcore_train import Accuracy, Callback, Evaluator, Event, Trainer
from tests.docs.setups import small_demo, small_digits

model, train_loader, dev_loader, optimizer = small_demo("torch")
test_loader = dev_loader
