"""The torch givens plus ``trainer``: a Trainer over them that has trained one epoch."""
from tests.docs.setups.torch import *  # noqa: F401,F403
from tests.docs.setups.torch import Accuracy, Trainer, dev_loader, model, optimizer, train_loader

trainer = Trainer(model, train_loader, optimizer, device="cpu", n_epochs=1, progress_bar=None,
                  evaluate_dataloaders={"dev": dev_loader}, metrics={"acc": Accuracy()})
trainer.run(num_eval_sanity_batch=0)
