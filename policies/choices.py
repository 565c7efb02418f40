"""One registry type for every pluggable choice: model backends, executors, reward modes, reward sources, keypoint
finders. Each is a typed spec with a `name`, registered in a `Registry`, asked about by its fields.

Why one type: five hand-written registries had grown four rule sets (a taken name was a ValueError in one, a
ConfigError in another; one could replace, one could not unregister, one had a read-only view). Here a taken name is
always `DuplicateChoice` unless the caller says `replace=True`, an unknown one always a one-line ConfigError naming
the choices, unregistering returns the spec, and `view` is the read-only mapping readers get.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

from sim_envs.errors import ConfigError, DuplicateChoice


class Named(Protocol):
    @property
    def name(self) -> str: ...


Spec = TypeVar("Spec", bound=Named)


def choose_names(flag: str) -> Callable[[str, Sequence[Named]], str]:
    """The usual unknown-name message: `unknown --flag 'x': choose a, b`."""
    return lambda name, specs: f"unknown {flag} {name!r}: choose {', '.join(s.name for s in specs)}"


class Registry(Generic[Spec]):
    """Name -> spec, in registration order. `kind` names a spec in errors ("backend"); `unknown` words the error
    for a name that is not registered (it gets the name and the registered specs)."""

    def __init__(self, kind: str, unknown: Callable[[str, Sequence[Spec]], str]):
        self.kind = kind
        self._unknown = unknown
        self._specs: dict[str, Spec] = {}
        self.view: Mapping[str, Spec] = MappingProxyType(self._specs)
        """The registered specs by name, read-only: register and unregister through the registry."""

    def register(self, spec: Spec, replace: bool = False) -> Spec:
        """Make `spec` choosable by its name; a taken name is refused unless `replace` says to put this one in its place."""
        if spec.name in self._specs and not replace:
            raise DuplicateChoice(f"a {self.kind} named {spec.name!r} is registered already; give the new one another name "
                                  "(or register it with replace=True to put it in the old one's place)")
        self._specs[spec.name] = spec
        return spec

    def unregister(self, name: str) -> Spec:
        """Take a registered spec out (a test's own choice), and return it; an unknown name is the usual error."""
        return self._specs.pop(self.get(name).name)

    def get(self, name: str) -> Spec:
        """The spec registered as `name`, or a one-line ConfigError naming the choices."""
        try:
            return self._specs[name]
        except KeyError:
            raise ConfigError(self._unknown(name, list(self._specs.values()))) from None

    def specs(self) -> list[Spec]:
        return list(self._specs.values())

    def names(self) -> list[str]:
        return list(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)
