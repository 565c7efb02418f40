"""A process's /proc/PID/stat, read past its command name.

The command name sits in parentheses and may itself hold spaces and parentheses (a process names itself), so the
fields are only safe to split after the last ")". Every reader of the file here goes through this one function.
"""

from __future__ import annotations


def stat_fields(pid: int | str) -> list[str]:
    """Fields 3 onward of proc(5)'s /proc/PID/stat: index 0 is the state, 1 the parent, 11 and 12 the user and system
    CPU ticks, 19 the start time. Raises OSError when the process is gone or /proc will not say."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].decode("ascii", "replace").split()
