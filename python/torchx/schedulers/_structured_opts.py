"""``StructuredOpts``: a scheduler's run options as a typed dataclass (TorchX's
``torchx.schedulers.api.StructuredOpts``)."""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from dataclasses import MISSING, fields
from typing import Any, Dict, Iterator, Mapping, cast

from torchx.specs.api import CfgVal, cases, runopts
from torchx.util.types import decode_optional

_snake_to_camel = cases.snake_to_camel
_camel_to_snake = cases.camel_to_snake


def _is_structured(tp: Any) -> bool:
    return inspect.isclass(tp) and issubclass(tp, StructuredOpts)


class StructuredOpts(Mapping[str, CfgVal]):
    """Base of a ``@dataclass`` whose fields are run options::

        @dataclass
        class MyOpts(StructuredOpts):
            cluster: str = "default"
            \"\"\"Cluster to submit to.\"\"\"

    ``as_runopts()`` builds the ``runopts`` (help from each field's docstring, required when
    there is no default), ``from_cfg(cfg)`` the typed instance (keys in snake_case or
    camelCase, or a field's ``metadata["cfg_key"]``). A field that is itself
    ``StructuredOpts`` is flattened as ``field.key``. Instances are read-only mappings of the
    options, and ``a | b`` merges two into a cfg dict."""

    @classmethod
    def _hints(cls) -> Dict[str, Any]:
        return typing.get_type_hints(cls)

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, CfgVal]) -> Any:
        hints = cls._hints()
        kwargs: Dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            tp = decode_optional(hints.get(f.name, str))
            if _is_structured(tp):
                prefix = f"{f.name}."
                nested = {k[len(prefix) :]: v for k, v in cfg.items() if k.startswith(prefix)}
                if nested or (f.default is MISSING and f.default_factory is MISSING):
                    kwargs[f.name] = tp.from_cfg(nested)
                continue
            given = [
                k
                for k in dict.fromkeys((f.metadata.get("cfg_key", f.name), f.name, _snake_to_camel(f.name)))
                if k in cfg
            ]
            if given:
                # As the nightly: two spellings of one field must agree.
                for other in given[1:]:
                    if cfg[other] != cfg[given[0]]:
                        from torchx.specs.api import InvalidRunConfigException

                        raise InvalidRunConfigException(
                            f"Run option `{f.name}` was passed under two spellings (`{given[0]}` and "
                            f"`{other}`) with conflicting values. Pass it once, as `{f.name}`",
                            f.name,
                            cfg,
                        )
                kwargs[f.name] = cfg[given[0]]
        return cls(**kwargs)

    @classmethod
    def get_docstrings(cls) -> Dict[str, str]:
        """Field name -> the string literal right after the field in the class body."""
        docs: Dict[str, str] = {}
        try:
            tree: Any = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError, SyntaxError):
            tree = None  # a generated class: its fields' metadata hold the help
        body = tree.body[0].body if tree is not None and tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name not in docs and "help" in f.metadata:
                docs[f.name] = f.metadata["help"]  # a generated class (no source to read)
        hints = cls._hints()
        for f in fields(cls):  # type: ignore[arg-type]
            tp = decode_optional(hints.get(f.name, str))
            if _is_structured(tp):
                for key, doc in tp.get_docstrings().items():
                    docs[f"{f.name}.{key}"] = doc
        return docs

    @classmethod
    def as_runopts(cls) -> runopts:
        opts = runopts()
        hints = cls._hints()
        docs = cls.get_docstrings()
        for f in fields(cls):  # type: ignore[arg-type]
            tp = decode_optional(hints.get(f.name, str))
            if _is_structured(tp):
                for key, opt in tp.as_runopts():
                    opts.add(
                        f"{f.name}.{key}",
                        type_=opt.opt_type,
                        help=opt.help,
                        default=opt.default,
                        required=opt.is_required,
                    )
                continue
            has_default = f.default is not MISSING
            required = not has_default and f.default_factory is MISSING
            opts.add(
                f.metadata.get("cfg_key", f.name),
                type_=tp,
                help=docs.get(f.name, f.name),
                default=cast(CfgVal, f.default) if has_default else None,
                required=required,
            )
        return opts

    def __getitem__(self, key: str) -> CfgVal:
        names = {f.name: f for f in fields(self)}  # type: ignore[arg-type]
        if "." in key:
            prefix, rest = key.split(".", 1)
            nested = getattr(self, _camel_to_snake(prefix), None)
            if isinstance(nested, StructuredOpts):
                return nested[rest]
            raise KeyError(key)
        snake = _camel_to_snake(key)
        if snake in names:
            return cast(CfgVal, getattr(self, snake))
        for f in names.values():
            if f.metadata.get("cfg_key") == key:
                return cast(CfgVal, getattr(self, f.name))
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        hints = self._hints()
        for f in fields(self):  # type: ignore[arg-type]
            if _is_structured(decode_optional(hints.get(f.name, str))):
                nested = getattr(self, f.name)
                if nested is not None:
                    yield from (f"{f.name}.{k}" for k in nested)
            else:
                yield f.metadata.get("cfg_key", f.name)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __or__(self, other: "StructuredOpts") -> Dict[str, CfgVal]:
        return {**dict(self.items()), **dict(other.items())}
