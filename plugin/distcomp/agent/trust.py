"""Whether a record (or a secrets file) may be acted on, as ssh decides for a key file.

A record says what runs: whoever may change it chooses the command. So a record is read only if
it belongs to the user who runs it (or to root: a file Kubernetes mounts from a ConfigMap, a
system-wide install), no one else may write it, and its folder cannot be emptied and refilled
by others (writable by all without the sticky bit). A secrets file must moreover be readable by
its owner only (it is written mode 600). A group-writable file is accepted where the group is
its owner's private one (the owner's primary group, no other member: a umask of 002 on a
user-private-group system), as Debian's OpenSSH accepts it. Standard library only: the node
agent carries this module.
"""

from __future__ import annotations

import os
import shlex
import stat


class Untrusted(Exception):
    """A file that may not be used: which, why, and what to do (one line)."""


def _user(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _private_group(st: os.stat_result) -> bool:
    """The file's group is its owner's own: their primary group, with no other member."""
    try:
        import grp
        import pwd

        owner = pwd.getpwuid(st.st_uid)
        group = grp.getgrgid(st.st_gid)
    except (ImportError, KeyError):
        return False
    return owner.pw_gid == st.st_gid and all(m == owner.pw_name for m in group.gr_mem)


def problem(path: str, st: os.stat_result, what: str, secret: bool = False) -> str | None:
    """Why the file ``path`` (``st``: its status) may not be used as ``what``, with the fix; or None."""
    shown = shlex.quote(path)
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISREG(st.st_mode):
        return f"{what} {path} is not a regular file; give the file distcomp wrote"
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        others = "" if me == 0 else " or root"
        return (f"{what} {path} is owned by {_user(st.st_uid)}, not by you ({_user(me)}){others}: "
                "distcomp runs only what its own user (or root) wrote; make the job again as yourself")
    if mode & 0o002 or (mode & 0o020 and not _private_group(st)):
        by = "anyone" if mode & 0o002 else "its group"
        return (f"{what} {path} (mode {mode:04o}, owner {_user(st.st_uid)}) is writable by {by}, who could "
                f"choose what runs: make it yours alone (chmod go-w {shown}) and check its content, or make "
                "the job again")
    if secret and mode & 0o077:
        return (f"{what} {path} (mode {mode:04o}, owner {_user(st.st_uid)}) is open to others: it must be "
                f"readable by its owner only (chmod 600 {shown}), as distcomp writes it")
    return None


def folder_problem(path: str, what: str) -> str | None:
    """Why the folder holding ``path`` lets others replace it (writable by all, no sticky bit); or None."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(folder)
    except OSError:
        return None  # the file was opened through it: nothing more to learn
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o002 and not mode & stat.S_ISVTX:
        return (f"{what} {path} lies in {folder} (mode {mode:04o}), where anyone may replace it: "
                f"chmod o-w {shlex.quote(folder)} (or +t), or keep the job in a folder of your own")
    return None


def read_trusted(path: str, what: str, secret: bool = False, follow: bool = True) -> str:
    """The text of file ``path``, opened once and checked on what was opened (no race with a
    swap); raises Untrusted with the reason and the fix if it may not be used, OSError if it
    cannot be read. ``follow=False``: a symbolic link is refused (a secrets file named in a
    record must be a file of the record's own folder)."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    except OSError as exc:
        if not follow and os.path.islink(path):
            raise Untrusted(f"{what} {path} is a symbolic link: it must be a file in the record's own folder, "
                             "as distcomp writes it") from None
        raise exc
    try:
        found = problem(path, os.fstat(fd), what, secret) or folder_problem(path, what)
        if found:
            raise Untrusted(found)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")
