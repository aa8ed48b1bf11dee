"""The oneflow examples' givens: the demo MLP on a slice of the digits, its dataloaders and Adam."""
import oneflow as flow

from fastcore_train import Accuracy, Callback, Evaluator, Event, Trainer
from tests.docs.setups import small_demo, small_digits

model, train_loader, dev_loader, optimizer = small_demo("oneflow")
test_loader = dev_loader
