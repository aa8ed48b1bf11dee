"""Choosing which model function a step calls, and the wrapper module that lets a data-parallel
wrapper's forward run any model method: written once, used by every backend's drivers."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

CallFn = tuple[Callable[..., Any], Optional[Callable[..., Any]]]
DEFAULT_STEP_NAMES = ("train_step", "evaluate_step")


def resolve_method(module: Any, fn_name: str, forward_name: str = "forward") -> tuple[str, Callable[..., Any]]:
    """``(name to call, function whose signature describes it)``.

    The model's method ``fn_name`` if it has one; for the default names (``train_step``,
    ``evaluate_step``) the framework's forward otherwise; any other missing name is an error.
    """
    method = getattr(module, fn_name, None)
    if callable(method):
        return fn_name, method
    if fn_name in DEFAULT_STEP_NAMES:
        return forward_name, getattr(module, forward_name)
    raise ValueError(f"The model ({type(module).__name__}) has no method {fn_name!r} to call.")


def single_process_call(model: Any, fn_name: str, forward_name: str = "forward") -> CallFn:
    """The call for one process: a method directly, or ``model(...)`` for the forward (hooks run)."""
    target, signature = resolve_method(model, fn_name, forward_name)
    if target == forward_name:
        return model, signature
    return signature, None


def data_parallel_call(wrapper: Any, module: Any, fn_name: str, for_training: bool, user_wrapped: bool,
                       wrapper_name: str, forward_name: str = "forward") -> CallFn:
    """The call for a data-parallel rank.

    Training goes through ``wrapper`` (which dispatches ``wrapper(method_name, ...)`` to the
    module) so that gradients are synchronised; evaluation calls the module directly, since it
    needs no synchronisation and ranks may evaluate different numbers of batches. A wrapper the
    user built can only run its forward.
    """
    target, signature = resolve_method(module, fn_name, forward_name)
    if not for_training:
        return (module if target == forward_name else signature), signature
    if user_wrapped:
        if target != forward_name:
            raise ValueError(
                f"The model is a {wrapper_name} you wrapped yourself, so only its forward keeps gradients in "
                f"sync, but training would call {fn_name!r}. Pass the unwrapped model (the driver wraps it so "
                "that train_step is synchronised too) or train through forward.")
        return wrapper, signature
    return functools.partial(wrapper, target), signature



class DataParallelCalls:
    """Mixin of a data-parallel driver (listed before its single-process base): training calls go
    through the gradient-synchronising wrapper ``self.model``, everything else to the user's module.

    The driver sets ``_user_module`` (the user's model, unwrapped) and ``_user_wrapped`` (whether
    the user passed the framework's wrapper already) and names the wrapper in ``wrapper_name``.
    """

    #: The framework's data-parallel wrapper, as named in errors.
    wrapper_name = "the data-parallel wrapper"
    model: Any
    _user_module: Any
    _user_wrapped: bool

    def unwrap_model(self) -> Any:
        return self._user_module

    def get_model_call_fn(self, fn_name: str, for_training: bool = True) -> CallFn:
        return data_parallel_call(self.model, self._user_module, fn_name, for_training,
                                  user_wrapped=self._user_wrapped, wrapper_name=self.wrapper_name)

def method_dispatch_class(module_base: type, module_name: str) -> type:
    """A subclass of the framework's module class ``module_base`` wrapping a model, whose forward
    runs the model method named by its first argument (``"forward"``: the model's own call).

    Named ``_MethodDispatch`` in ``module_name`` (the backend module that uses it), so that it
    reads and pickles as a class of that module.
    """

    def __init__(self: Any, model: Any) -> None:
        module_base.__init__(self)
        self.model = model

    def forward(self: Any, fastcore_method: str, *args: Any, **kwargs: Any) -> Any:
        if fastcore_method == "forward":
            return self.model(*args, **kwargs)
        return getattr(self.model, fastcore_method)(*args, **kwargs)

    dispatch = type("_MethodDispatch", (module_base,), {
        "__init__": __init__, "forward": forward, "__module__": module_name,
        "__doc__": "Lets a data-parallel wrapper's forward run any model method, so gradients are synchronised.",
    })
    return dispatch
