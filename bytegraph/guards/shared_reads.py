"""Where the fast guard function reads each source: once per call, kept in a local.

The plain form of a guard (reports, ``first_failure``) reads every source from
the frame again in each condition. The fast form reads it once; every later
condition on it, or on anything reached through it, reads the local that the
first read stored::

    type(___s2 := self._modules['0']) is Linear and not (___s2.__dict__['_forward_hooks'])

1. ``guards/build.py`` writes a guard's conditions as templates: text with
   ``READ`` where a condition reads the guard's source (one template list serves
   every guard of one kind and expected value).
2. ``place`` puts the reads in. A source's first read in the function becomes
   ``(___s3<STORE>text)``, ``text`` reading it through its base's local; later
   reads are ``___s3``. Sources that read alike (equal text) share one read.
3. ``resolved``, once every condition is known, makes each ``<STORE>`` mark a
   store (``___s3 := ``) where the local is read again, and nothing where it is
   not: half a model's reads (its hook dicts, checked empty) are read once.
4. An nn.Module's own attributes (``m._forward_hooks``) are read from its
   instance dict where the lookup would find them there
   (``cheaper_forms.reads_instance_dict``): a dict subscript, not a call of
   ``nn.Module.__getattr__``.
5. A source with a ``bound_expr(const, base)`` reads through objects bound as
   constants of the guard function (``const(obj)`` names one; ``base`` is the text
   that reads its base): another module's global (an inlined callee's) through
   that module's dict, where the plain text calls ``__import__('sys')`` (GPT-2's
   guard read 84 such globals, a call each).

The text that reads a source must be a primary expression (a name, an
attribute, a subscript or a call), as every ``Source.expr()`` is: it is put
where the template had ``READ``, whatever surrounds it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from bytegraph.guards import cheaper_forms
from bytegraph.guards.sources import AttrSource, LocalSource, Source

# Where a template reads the guard's source. No repr and no source text holds either
# character (repr escapes them; local_name escapes every non-identifier character).
READ = "\x00"
STORE = "\x01"
_STORES = re.compile(r"(___s\d+)\x01")


def read_marker() -> str:
    """The ``e()`` that writes templates (``GuardFunctionBuilder._expressions``)."""
    return READ


class Templates(NamedTuple):
    """A guard's conditions with ``READ`` where they read its source."""

    texts: list[str]
    first: int  # the index of the first text that reads the source; -1: none does
    again: bool  # whether they read it more than once

    @staticmethod
    def of(texts: list[str]) -> Templates:
        first = next((i for i, t in enumerate(texts) if READ in t), -1)
        return Templates(texts, first, sum(t.count(READ) for t in texts) > 1)


class SharedReads:
    """The locals of one fast guard function, and the text that reads each source."""

    def __init__(self, checked_types: dict[Source, Any], const: Callable[[Any], str]) -> None:
        self._const = const  # the name of a constant of the guard function
        self._locals: dict[str, str] = {}  # a source's plain text -> its local
        self._reused: set[str] = set()  # the locals read again after their store
        self._types = checked_types  # sources whose exact type is checked by now
        self._instance_dict_reads: dict[tuple[Any, str], bool] = {}

    def ref(self, source: Source) -> str:
        """The text that reads ``source`` at this point of the guard expression."""
        plain = source.expr()
        name = self._locals.get(plain)
        if name is not None:
            self._reused.add(name)
            return name
        if isinstance(source, LocalSource):
            return plain
        return self._first_read(source, plain)

    def place(self, templates: Templates, source: Source, plain: str, keys: list[str]) -> list[str]:
        """``templates`` with their reads of ``source`` put in; ``keys`` are the templates
        with ``plain``, the source's own text, put in."""
        texts, first, again = templates
        name = self._locals.get(plain)
        if name is not None:  # read by an earlier condition
            self._reused.add(name)
            return [t.replace(READ, name) for t in texts]
        if first < 0 or isinstance(source, LocalSource):
            return keys  # no read to store (a local; a global that must stay undefined)
        read = self._first_read(source, plain)
        name = self._locals[plain]
        text = texts[first]
        at = text.index(READ)
        if text[at - 1:at] == "(" and text[at + 1:at + 2] == ")":
            read = read[1:-1]  # f(x := y): a call's only argument needs no parentheses
        placed = [*keys[:first], text[:at] + read + text[at + 1:].replace(READ, name)]
        if not again:
            return placed + texts[first + 1:]
        self._reused.add(name)
        return placed + [t.replace(READ, name) for t in texts[first + 1:]]

    def resolved(self, text: str) -> str:
        """``text`` with each first read stored in its local where the local is read
        again (``(___s3 := m.weight)``), and only read where not (``(m.weight)``)."""
        return _STORES.sub(lambda m: f"{m[1]} := " if m[1] in self._reused else "", text)

    def _first_read(self, source: Source, plain: str) -> str:
        """``(___s3<STORE>text)``: ``source`` read through its base's local."""
        base = getattr(source, "base", None)
        bound_expr = getattr(source, "bound_expr", None)
        if bound_expr is not None:
            text = bound_expr(self._const, base and self.ref(base))
        elif base is None:
            text = plain
        elif isinstance(source, AttrSource) and self._reads_instance_dict(base, source.attr):
            instance_dict = self._locals.get(f"{base.expr()}.__dict__")
            if instance_dict is None:
                instance_dict = self.ref(AttrSource(base, "__dict__"))
            else:
                self._reused.add(instance_dict)
            text = f"{instance_dict}[{source.attr!r}]"
        else:
            base_plain = base.expr()
            text = plain
            if plain.startswith(base_plain):
                text = self.ref(base) + plain[len(base_plain):]
        name = self._locals[plain] = f"___s{len(self._locals)}"
        return f"({name}{STORE}{text})"

    def _reads_instance_dict(self, base: Source, attr: str) -> bool:
        if attr not in cheaper_forms.MODULE_OWN:  # most attributes: no lookup of base
            return False
        cls = self._types.get(base)
        if cls is None:
            return False
        key = (cls, attr)
        found = self._instance_dict_reads.get(key)
        if found is None:
            found = self._instance_dict_reads[key] = cheaper_forms.reads_instance_dict(cls, attr)
        return found
