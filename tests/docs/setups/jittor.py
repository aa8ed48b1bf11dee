"""The jittor examples' givens: the demo MLP on a slice of the digits, its dataloaders and Adam."""
import jittor as jt

from fastcore_train import Accuracy, Callback, Evaluator, Event, Trainer
from tests.docs.setups import small_demo, small_digits

model, train_loader, dev_loader, optimizer = small_demo("jittor")
test_loader = dev_loader
# The numpy arrays the jittor page builds its own datasets from.
x_train, y_train, x_dev, y_dev = (small_digits().x_train, small_digits().y_train,
                                  small_digits().x_test, small_digits().y_test)
