"""The restricted unpickler (fastcore_train/utils/safe_pickle.py), with numpy only: plain data and
numpy arrays come back at every pickle protocol; every way a pickle can name code is refused
before it runs (a marker file a plain unpickler would create stays absent)."""
from __future__ import annotations

import collections
import copyreg
import pickle

import numpy as np
import pytest

from fastcore_train.utils import safe_pickle
from fastcore_train.utils.safe_pickle import UnsafePickleError


class Plant:
    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_plain_data_and_numpy_arrays_come_back(protocol):
    data = collections.OrderedDict(
        weight=np.arange(6, dtype=np.float32).reshape(2, 3), step=np.int64(7), lr=np.float32(0.5),
        mask=np.array([True, False]), empty=np.zeros((0, 3)), names=("a", "b"), tags={"x", "y"},
        frozen=frozenset({1}), raw=b"\x00\x01", z=1 + 2j, nested=[{"k": [None, 1.5, "s"]}])
    loaded = safe_pickle.loads(pickle.dumps(data, protocol=protocol))
    assert type(loaded) is collections.OrderedDict and list(loaded) == list(data)
    for key, value in data.items():
        if isinstance(value, np.ndarray):
            assert loaded[key].dtype == value.dtype and loaded[key].shape == value.shape
            np.testing.assert_array_equal(loaded[key], value)
        else:
            assert loaded[key] == value and type(loaded[key]) is type(value)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_reduce_to_any_other_callable_is_refused_unrun(tmp_path, protocol):
    marker = tmp_path / "marker"
    payload = pickle.dumps({"weight": np.ones(2), "extra": [Plant(marker)]}, protocol=protocol)
    with pytest.raises(UnsafePickleError, match=r"Refused to load 'w\.pkl': it refers to io\.open"):
        safe_pickle.loads(payload, source="'w.pkl'")
    assert not marker.exists()
    pickle.loads(payload)  # control: a plain unpickler runs it
    assert marker.exists()


@pytest.mark.parametrize("module, name", [("os", "system"), ("builtins", "eval"), ("builtins", "getattr"),
                                          ("numpy", "load"), ("numpy", "ndarray.tofile"),
                                          ("numpy.core.multiarray", "_reconstruct.__globals__")])
def test_names_outside_the_list_are_refused(module, name):
    stack_global = (b"\x80\x04\x8c" + bytes([len(module)]) + module.encode() + b"\x8c" + bytes([len(name)])
                    + name.encode() + b"\x93.")
    for data in (stack_global, f"c{module}\n{name}\n.".encode()):  # protocol 4 and protocol 0 spellings
        with pytest.raises(UnsafePickleError, match=f"{module}.{name}"):
            safe_pickle.loads(data)


def test_an_object_array_unpickles_its_items_through_the_same_check(tmp_path):
    marker = tmp_path / "marker"
    array = np.empty(2, dtype=object)
    array[:] = [1, Plant(marker)]
    with pytest.raises(UnsafePickleError, match="io.open"):
        safe_pickle.loads(pickle.dumps(array))
    assert not marker.exists()


def test_extension_codes_and_persistent_ids_are_refused():
    copyreg.add_extension("os", "system", 0xF0)
    try:
        with pytest.raises(UnsafePickleError, match="os.system"):
            safe_pickle.loads(b"\x80\x02\x82\xf0.")  # EXT1 240
    finally:
        copyreg.remove_extension("os", "system", 0xF0)
    with pytest.raises(UnsafePickleError, match="persistent ids"):
        safe_pickle.loads(b"Pabc\n.")


def test_extra_names_are_what_a_backend_allows():
    data = pickle.dumps(collections.Counter(a=2))
    with pytest.raises(UnsafePickleError, match="collections.Counter"):
        safe_pickle.loads(data)
    assert safe_pickle.loads(data, extra={("collections", "Counter"): collections.Counter}) == {"a": 2}


def test_damaged_bytes_are_an_unpickling_error_naming_the_file(tmp_path):
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps({"w": np.ones(3)})[:-5])
    with pytest.raises(pickle.UnpicklingError, match=r"Cannot read '.*model\.pkl': it is damaged"):
        safe_pickle.load_file(path)


@pytest.mark.also_per_backend  # numpy 1.26 is what the jittor and oneflow envs have
@pytest.mark.skipif(int(np.__version__.split(".")[0]) >= 2, reason="numpy 1.26's partial numpy._core shim only")
def test_numpy_1_loads_while_its_core_shim_is_imported():
    """numpy 1.26 ships a partial ``numpy._core`` that becomes an attribute once pyarrow or pandas
    imports part of it; the unpickler must still use ``numpy.core`` (found with HF datasets)."""
    import importlib

    importlib.import_module("numpy._core._multiarray_umath")
    array = np.arange(4, dtype=np.float32)
    for protocol in PROTOCOLS:
        np.testing.assert_array_equal(safe_pickle.loads(pickle.dumps(array, protocol=protocol)), array)
