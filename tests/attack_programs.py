"""What every attack on the jail starts with: the real `os` and builtins reached through public routes, and the
worker's audit hook switched off (it reads a module global on every event), so that only the OS jail is left to test."""

LINT_OFF = '''
import numpy as np


def lint_off():
    """The real os and builtins, and the audit hook switched off."""
    for cls in ().__class__.__bases__[0].__subclasses__():
        if cls.__name__ == "catch_warnings":
            b = cls()._module.__builtins__
            break
    os = b["__import__"]("os")
    real = os.sys.modules["builtins"]
    everything = real.type("Everything", (), {"__contains__": lambda s, e: True})()
    os.sys.modules["__main__"].HARMLESS_EVENTS = everything
    return os, real
'''

CPU_BURN = LINT_OFF + '''

_cpu_clock = lint_off()[1].__import__("time").process_time


def burn_cpu(seconds):
    """Spin until this process's CPU clock (the kernel's count, which the parent judges) has advanced by `seconds`."""
    start = _cpu_clock()
    spins = 0
    while _cpu_clock() - start < seconds:
        spins += 1
    return spins
'''
"""LINT_OFF plus `burn_cpu(seconds)`: an attack that must cost a given CPU time measures it on its own clock, so it costs
that time on a fast CPU and on a busy one alike (a loop sized by a timed probe once fell short of the limit on a fast,
loaded CI machine: the probe's per-call overhead was read as loop time)."""


READ_ONE_REQUEST = """
import os, struct
size = struct.unpack(">I", os.read(0, 4))[0]
while size:
    size -= len(os.read(0, size))
"""
"""A stand-in for the jailed worker (no reward, no jail): reads one framed request from the parent; what follows it
(its reply, its exit) is the behaviour a test puts to the parent."""
