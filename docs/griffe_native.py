"""A griffe extension for the API pages (mkdocs.yml): the docstrings of kip714's compiled modules.

griffe reads a compiled module's ``.pyi`` stub beside it (signatures and types, no inspection); the
docstrings live in the compiled module itself (Cython keeps them). This copies each one onto the stub's
object that has none, without the signature line Cython puts first, and turns the reST roles the
docstrings use (``:class:`X```) into Markdown code spans and their ``.. code-block::`` into fenced blocks."""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj|const):`~?([^`]+)`")
CODE_BLOCK = re.compile(r"^\.\. code-block:: *(\w*)\n\n((?:(?: {4}.*)?\n)+)", re.M)
#: what Cython writes for a ``cdef public`` attribute without a docstring: ``name: 'int32_t'``
C_ATTRIBUTE = re.compile(r"^\w+: '[^']*'$")


def _runtime_doc(value: Any, name: str) -> str | None:
    doc = getattr(value, "__doc__", None)
    if not isinstance(doc, str) or not doc.strip():
        return None
    lines = inspect.cleandoc(doc).splitlines()
    if lines and re.match(rf"^{re.escape(name)}\(.*\)(\s*->.*)?$", lines[0]):
        lines = lines[1:]  # Cython's embedded signature: the stub has a typed one
        while lines and not lines[0].strip():
            lines = lines[1:]
    text = "\n".join(lines).strip()
    return text if text and not C_ATTRIBUTE.match(text) else None


def _overloads_only(module: griffe.Module) -> None:
    """A name a stub gives only as ``@overload``s (the compiled function has no Python body to stub): a
    function with those overloads, so that the page shows it."""
    for name, overloads in list(module.overloads.items()):
        if name not in module.members and overloads:
            first = overloads[0]
            function = griffe.Function(
                name,
                lineno=first.lineno,
                endlineno=overloads[-1].endlineno,
                parameters=first.parameters,
                returns=first.returns,
            )
            function.overloads = list(overloads)
            module.set_member(name, function)


def _fill(obj: griffe.Object, runtime: Any) -> None:
    for name, member in obj.members.items():
        if member.is_alias or name.startswith("_"):
            continue
        value = getattr(runtime, name, None)
        if value is None:
            continue
        descriptor = (
            inspect.isgetsetdescriptor(value) or inspect.ismemberdescriptor(value) or isinstance(value, property)
        )
        if member.is_attribute and not descriptor:
            continue  # a constant: its __doc__ is its type's
        if member.docstring is None and (doc := _runtime_doc(value, name)):
            member.docstring = griffe.Docstring(doc, parent=member)
        if member.is_class:
            _fill(member, value)


def _markdown(text: str) -> str:
    """reST roles as code spans, ``.. code-block::`` as a fenced block."""
    text = ROLE.sub(r"`\1`", text)
    return CODE_BLOCK.sub(lambda m: f"```{m.group(1)}\n{inspect.cleandoc(m.group(2))}\n```\n\n", text + "\n").rstrip()


def _roles(obj: griffe.Object) -> None:
    if obj.docstring is not None:
        obj.docstring.value = _markdown(obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias:
            _roles(member)


class NativeDocstrings(griffe.Extension):
    """Fill the docstrings of modules read from ``.pyi`` stubs from the compiled modules."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        modules = [pkg]
        while modules:
            module = modules.pop()
            modules.extend(m for m in module.modules.values() if not m.is_alias)
            if module.filepath is not None and str(module.filepath).endswith(".pyi"):
                _overloads_only(module)
                _fill(module, importlib.import_module(module.path))
        _roles(pkg)
