"""The paddle examples' givens: the demo MLP on a slice of the digits, its dataloaders and Adam."""
import paddle

from fastcore_train import Accuracy, Callback, Evaluator, Event, Trainer
from tests.docs.setups import small_demo, small_digits

model, train_loader, dev_loader, optimizer = small_demo("paddle")
test_loader = dev_loader
