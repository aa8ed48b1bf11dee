"""Which layers ``activation_checkpointing=`` selects: the framework-free part (any module tree
that answers ``named_children()``), and its errors."""
from __future__ import annotations

import pytest

from fastcore_train.drivers.activation_checkpointing import layer_selector, select_layers


class Node:
    """A module tree node: what the selection reads of a framework's module (its children)."""

    def __init__(self, **children: "Node") -> None:
        self.children = children

    def named_children(self):
        return list(self.children.items())


class Block(Node): ...
class Linear(Node): ...
class ModuleList(Node): ...
class LayerList(Node): ...
class Sequential(Node): ...
class Model(Node): ...


def model() -> Model:
    return Model(embed=Linear(), layers=ModuleList(**{"0": Block(fc=Linear()), "1": Block(fc=Linear())}),
                 head=Sequential(**{"0": Linear()}), extra=LayerList(**{"0": Block()}))


def names(spec) -> list[str]:
    return [name for name, _ in select_layers(model(), spec)]


def test_true_selects_the_direct_children_of_every_container():
    assert names(True) == ["layers.0", "layers.1", "head.0", "extra.0"]


def test_class_names_qualified_names_classes_and_predicates():
    assert names("Block") == ["layers.0", "layers.1", "extra.0"]
    assert names([f"{__name__}.Block", "Sequential"]) == ["layers.0", "layers.1", "head", "extra.0"]
    assert names(Linear) == ["embed", "layers.0.fc", "layers.1.fc", "head.0"]
    assert names([Block, "Linear"]) == ["embed", "layers.0", "layers.1", "head.0", "extra.0"]
    assert names(lambda name, module: name.endswith(".fc")) == ["layers.0.fc", "layers.1.fc"]


def test_a_selected_layer_is_not_searched_further_and_the_model_itself_never_selected():
    assert names(Node) == ["embed", "layers", "head", "extra"]  # every child matches; none below them


def test_off_values_select_nothing():
    assert layer_selector(None) is None and layer_selector(False) is None
    assert select_layers(model(), None) == [] and select_layers(model(), False) == []


def test_a_spec_that_selects_nothing_lists_the_layer_classes():
    with pytest.raises(ValueError, match="'Blok'.*selects no layer of this Model; its layer classes are: Linear, "
                                         "ModuleList, Block, Sequential, LayerList"):
        select_layers(model(), "Blok")
    with pytest.raises(ValueError, match="no sublayers"):
        select_layers(Model(), True)


@pytest.mark.parametrize("spec", [3, [], ["Block", 3], {"Block": True}])
def test_a_spec_of_the_wrong_kind_says_what_is_accepted(spec):
    with pytest.raises(TypeError, match="activation_checkpointing takes True"):
        select_layers(model(), spec)
