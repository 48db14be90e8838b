"""Dataclasses to JSON data and back, generically over their annotated field types.

`encode` turns a value of a type (a dataclass, tuple, dict, list, numpy array or scalar, enum, str, int, float,
bool, None, or a union of these) into JSON data, arrays going to a side store (`Arrays`) that names them; `decode`
turns the data back into the type, checking every value's type on the way and naming the field of the first
that does not fit (`DecodeError`). A new field of a known type needs no code here; a new type, one codec line.

Unions of several dataclasses (an epilogue) carry their class's name as "type"; a bare `tuple` (a host step's
shape or values) holds its values as they come: whole numbers, floats, strings and nested lists.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import types
import typing

import numpy as np

TYPE_KEY = "type"


class DecodeError(ValueError):
    """`path`: the field (dotted from the document's root); the message says what was expected."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path or 'the document'}: {message}")
        self.path = path


class Arrays:
    """The numpy arrays of one document, each a `.npy` file (np.save: deterministic bytes), named in order."""

    def __init__(self, files: dict[str, bytes] | None = None, max_values: int = 0):
        self.files = files if files is not None else {}
        self.max_values = max_values  # the most values one array read back may have (0: any)

    def put(self, array: np.ndarray) -> str:
        name = f"arrays/{len(self.files)}.npy"
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
        self.files[name] = buffer.getvalue()
        return name

    def get(self, name: str, path: str) -> np.ndarray:
        if name not in self.files:
            raise DecodeError(path, f"names the array file {name!r}, which the design does not hold")
        try:
            array = np.load(io.BytesIO(self.files[name]), allow_pickle=False)
        except ValueError as error:
            raise DecodeError(path, f"{name} is no .npy array ({error})") from None
        if self.max_values and array.size > self.max_values:
            raise DecodeError(path, f"{name} holds {array.size:,} values, more than {self.max_values:,}")
        return array


def encode(value, kind, arrays: Arrays):
    """The JSON data of `value`, a value of the type `kind`."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if value is None:
        return None
    if origin in (typing.Union, types.UnionType):
        return _encode_union(value, args, arrays)
    if kind is np.ndarray:
        return {"array": arrays.put(value)}
    if kind is bytes:
        return {"array": arrays.put(np.frombuffer(value, np.int8))}
    if dataclasses.is_dataclass(kind) and type(value) is not kind:  # a subclass of the field's type, named
        return {TYPE_KEY: type(value).__name__} | encode(value, _subclass(kind, type(value).__name__), arrays)
    if dataclasses.is_dataclass(kind):
        return {f.name: encode(getattr(value, f.name), hint, arrays) for f, hint in _fields(kind)}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return value.value
    if origin is dict:
        return {str(k): encode(v, args[1], arrays) for k, v in value.items()}
    if origin in (tuple, list):
        return [encode(v, _element(origin, args, i), arrays) for i, v in enumerate(value)]
    return _plain(value)


def decode(data, kind, arrays: Arrays, path: str = ""):
    """The value of type `kind` that `data` (from `encode`) describes; DecodeError naming the field that does not
    fit."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return _decode_union(data, args, arrays, path)
    if kind is type(None):
        return _expect(data is None, data, path, "null")
    if kind is np.ndarray or kind is bytes:
        if not isinstance(data, dict) or set(data) != {"array"} or not isinstance(data["array"], str):
            raise DecodeError(path, 'expected {"array": "arrays/N.npy"}')
        array = arrays.get(data["array"], path)
        return array.astype(np.int8).tobytes() if kind is bytes else array
    if dataclasses.is_dataclass(kind):
        return _decode_dataclass(data, kind, arrays, path)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(data)
        except ValueError:
            raise DecodeError(path, f"expected one of {[m.value for m in kind]}") from None
    if origin is dict:
        _expect(isinstance(data, dict), data, path, "an object")
        return {k: decode(v, args[1], arrays, f"{path}.{k}") for k, v in data.items()}
    if origin in (tuple, list):
        _expect(isinstance(data, list), data, path, "a list")
        if origin is tuple and args and args[-1] is not Ellipsis and len(data) != len(args):
            raise DecodeError(path, f"expected a list of {len(args)} values, got {len(data)}")
        if origin is tuple and not args and kind is not tuple and data:  # tuple[()]
            raise DecodeError(path, "expected an empty list")
        values = [decode(v, _element(origin, args, i), arrays, f"{path}[{i}]") for i, v in enumerate(data)]
        return tuple(values) if origin is tuple else values
    return _decode_plain(data, kind, path)


_SCALARS = {  # annotation -> (accepted JSON types, conversion)
    int: ((int,), int), str: ((str,), str), bool: ((bool,), bool), float: ((int, float), lambda v: v),
    np.float32: ((int, float), np.float32), dict: ((dict,), lambda v: v),
}


def _decode_plain(data, kind, path: str):
    if kind is tuple or kind is typing.Any:
        return _untyped(data, path)
    accepted, convert = _SCALARS.get(kind, (None, None))
    if accepted is None:
        raise TypeError(f"{path}: no codec for {kind!r}")
    if isinstance(data, bool) and bool not in accepted:
        raise DecodeError(path, f"expected {kind.__name__}, got {json_type(data)}")
    return convert(_expect(isinstance(data, accepted), data, path, kind.__name__))


def _untyped(data, path: str):
    if isinstance(data, list):
        return tuple(_untyped(v, f"{path}[{i}]") for i, v in enumerate(data))
    return _expect(isinstance(data, (int, float, str)), data, path, "a number or a string")


def _plain(value):
    """A scalar (or a bare tuple's values) as JSON data."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, dict)) or value is None:
        return value
    raise TypeError(f"no codec for {type(value).__name__}")


def _encode_union(value, args, arrays: Arrays):
    classes = [a for a in args if dataclasses.is_dataclass(a)]
    for kind in args:
        if kind is not type(None) and _is_instance(value, kind):
            data = encode(value, kind, arrays)
            return {TYPE_KEY: kind.__name__} | data if len(classes) > 1 else data
    raise TypeError(f"{type(value).__name__} is none of {args}")


def _decode_union(data, args, arrays: Arrays, path: str):
    if data is None:
        return _expect(type(None) in args, data, path, "a value, not null")
    classes = {a.__name__: a for a in args if dataclasses.is_dataclass(a)}
    if len(classes) > 1:
        _expect(isinstance(data, dict) and data.get(TYPE_KEY) in classes, data, path,
                f"an object whose {TYPE_KEY!r} is one of {sorted(classes)}")
        rest = {k: v for k, v in data.items() if k != TYPE_KEY}
        return decode(rest, classes[data[TYPE_KEY]], arrays, path)
    errors = []
    for kind in (a for a in args if a is not type(None)):
        try:
            return decode(data, kind, arrays, path)
        except DecodeError as error:
            errors.append(error)
    raise errors[0]


def _decode_dataclass(data, kind, arrays: Arrays, path: str):
    _expect(isinstance(data, dict), data, path, f"an object ({kind.__name__})")
    if _subclasses(kind):  # a base class (`ming_py.dataflow.KindParams`): the data names its subclass
        names = sorted(_subclasses(kind))
        _expect(data.get(TYPE_KEY) in names, data, path, f"an object whose {TYPE_KEY!r} is one of {names}")
        return _decode_dataclass({k: v for k, v in data.items() if k != TYPE_KEY}, _subclass(kind, data[TYPE_KEY]),
                                 arrays, path)
    fields = dict((f.name, (f, hint)) for f, hint in _fields(kind))
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise DecodeError(f"{path}.{unknown[0]}".lstrip("."), f"is no field of {kind.__name__}")
    values = {}
    for name, (f, hint) in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DecodeError(f"{path}.{name}".lstrip("."), "is missing")
            continue
        values[name] = decode(data[name], hint, arrays, f"{path}.{name}".lstrip("."))
    try:
        return kind(**values)
    except (ValueError, TypeError) as error:  # the class's own check of its values (`__post_init__`)
        raise DecodeError(path, str(error)) from None


def _subclasses(kind) -> dict[str, type]:
    """The dataclasses derived from `kind` that are loaded, by name."""
    found = {}
    for sub in kind.__subclasses__():
        found |= {sub.__name__: sub} | _subclasses(sub)
    return found


def _subclass(kind, name: str) -> type:
    return _subclasses(kind)[name]


def _fields(kind):
    hints = typing.get_type_hints(kind)
    return [(f, hints[f.name]) for f in dataclasses.fields(kind)]


def _element(origin, args, index: int):
    """The type of element `index` of a list[T], tuple[T, ...] or tuple[A, B, ...]."""
    if not args:
        return typing.Any
    if origin is list or len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return args[index] if index < len(args) else typing.Any


def _is_instance(value, kind) -> bool:
    origin = typing.get_origin(kind)
    if origin is not None:
        return isinstance(value, origin) and (origin is not tuple or typing.get_args(kind) != () or not value)
    if kind is np.float32:
        return isinstance(value, (float, np.floating))
    if kind is float:
        return isinstance(value, (int, float, np.number))
    return isinstance(value, kind)


def _expect(ok: bool, data, path: str, what: str):
    if not ok:
        raise DecodeError(path, f"expected {what}, got {json_type(data)}")
    return data


def json_type(data) -> str:
    return {bool: "true/false", int: "a whole number", float: "a number", str: "a string", list: "a list",
            dict: "an object", type(None): "null"}.get(type(data), type(data).__name__)
