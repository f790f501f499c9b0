"""A saved model's netCDF groups read straight from HDF5 with h5py, as xarray reads them.

``RewardModel.load`` reads a saved model's groups with :func:`read_hdf5_groups`: 0.1 s for the
shipped population, where xarray's netCDF decoding takes 0.3 s of a live answer's first 0.6 s; a
file this reader does not recognise is read by xarray instead (``model.reward_model``). h5py and
xarray load with this module, which ``bayesgrpo.model.reward_model`` imports only when a posterior
is read: a live update on a saved model's live summary never imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import xarray as xr

#: HDF5 and netCDF bookkeeping attributes, which xarray does not show either.
_HDF5_BOOKKEEPING = frozenset(
    {
        "CLASS",
        "NAME",
        "DIMENSION_LIST",
        "REFERENCE_LIST",
        "_Netcdf4Dimid",
        "_Netcdf4Coordinates",
        "_FillValue",
    }
)


#: CF encodings xarray would decode on reading, which a saved model never holds.
_CF_ENCODINGS = frozenset({"units", "calendar", "scale_factor", "add_offset", "dtype", "missing_value"})


def read_hdf5_groups(path: Path, groups: Sequence[str]) -> dict[str, xr.Dataset]:
    """Every group of ``groups`` present in the file, read with h5py.

    Parameters
    ----------
    path : Path
        A netCDF-4 file written by h5netcdf (``RewardModel.save``).
    groups : sequence of str
        The groups to read; one the file lacks is left out.

    Returns
    -------
    dict of str to xarray.Dataset
        Each group present, in memory, as xarray reads it; the file is closed.

    Raises
    ------
    ValueError
        When a group is not in the layout this reader knows (a fill value other than NaN, a CF
        encoding, a variable without netCDF dimensions): xarray then reads the file.
    """
    with h5py.File(path, "r") as file:
        return {group: read_hdf5_group(file[group]) for group in groups if group in file}


def _attribute(value: Any) -> Any:
    """An HDF5 attribute as xarray shows it: text decoded, a one-element array as its element."""
    if isinstance(value, bytes | np.bytes_):
        return value.decode()
    if isinstance(value, np.ndarray) and value.shape == (1,):
        return value[0]
    return value


def read_hdf5_group(group: Any) -> xr.Dataset:
    """One netCDF-4 group written by h5netcdf (an ``h5py.Group``) as the Dataset xarray reads.

    Dimensions are HDF5 dimension scales: each has a netCDF id (``_Netcdf4Dimid``), a variable
    names its dimensions' ids (``_Netcdf4Coordinates``), and a scale whose ``NAME`` says it is
    no netCDF variable is a dimension without a coordinate. Floating fill values are NaN, which
    is what xarray's masking gives them; any other fill value is not this layout.

    Parameters
    ----------
    group : h5py.Group
        One group of the file.

    Returns
    -------
    xarray.Dataset
        Its variables, coordinates and attributes, read into memory.
    """
    dimension_names = {}
    for name, dataset in group.items():
        if dataset.attrs.get("CLASS") == b"DIMENSION_SCALE":
            dimension_names[int(dataset.attrs["_Netcdf4Dimid"])] = name
    variables: dict[str, xr.Variable] = {}
    coords: dict[str, xr.Variable] = {}
    for name, dataset in group.items():
        attributes = dataset.attrs
        fill = attributes.get("_FillValue")
        if fill is not None and not np.all(np.isnan(np.asarray(fill, dtype=float))):
            raise ValueError(f"{name}: fill value {fill!r}, which this reader does not decode")
        if "_Netcdf4Coordinates" in attributes:
            dims = tuple(dimension_names[int(i)] for i in attributes["_Netcdf4Coordinates"])
        elif dataset.ndim == 1 and name in dimension_names.values():
            dims = (name,)
        else:
            raise ValueError(f"{name}: no netCDF dimensions")
        if attributes.get("CLASS") == b"DIMENSION_SCALE" and bytes(attributes.get("NAME", b"")).startswith(
            b"This is a netCDF dimension but not a netCDF variable"
        ):
            continue
        values = dataset.asstr()[()] if dataset.dtype.kind == "O" else dataset[()]  # text is vlen
        if isinstance(values, np.ndarray) and values.dtype == object:
            values = values.astype(str)
        kept = {key: _attribute(value) for key, value in attributes.items() if key not in _HDF5_BOOKKEEPING}
        if kept.get("dtype") == "bool":  # xarray writes booleans as int8 and says so
            values, kept = np.asarray(values).astype(bool), {k: v for k, v in kept.items() if k != "dtype"}
        encoded = _CF_ENCODINGS & set(kept)
        if encoded:
            raise ValueError(f"{name}: CF encoding {sorted(encoded)}, which this reader does not decode")
        variable = xr.Variable(dims, values, kept)
        (coords if name in dimension_names.values() else variables)[name] = variable
    kept = {key: _attribute(value) for key, value in group.attrs.items() if not key.startswith("_NC")}
    return xr.Dataset(variables, coords=coords, attrs=kept)
