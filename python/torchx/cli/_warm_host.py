"""A warm host for a Python scheduler plugin: an interpreter that has imported TorchX and the
plugin once and forks a scheduler host (``torchx.cli._scheduler_host.serve``) for each command
of the native CLI, so a command pays for a fork instead of Python's start-up and imports.

The CLI starts it as ``python -c "... main()" <socket> <idle seconds> <name> [<module:attr>]``
when nothing listens on ``<socket>`` (a path in a private per-user directory, named after
everything the imports could depend on: the interpreter, the plugin and the environment). It
prints ``ready`` once it listens, then detaches. Each connection sends one JSON line
``{"env": {...}, "cwd": "..."}`` with three file descriptors attached (SCM_RIGHTS): the stdin,
stdout and stderr of the host to fork. The answer is ``{"pid": N}`` and, when that host exits,
``{"exit": code}`` (a negative code: killed by that signal); or ``{"stale": true}`` when a file it
imported, or a directory plugins are found in, changed since it started: it then stops listening
(the CLI starts a fresh one) and exits once its hosts have. It exits after ``<idle seconds>``
without a connection or a running host.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import threading
from typing import Any, Callable, Dict, Optional, Tuple

# (mtime_ns, size, inode) of a path, None if it is gone.
_Stamp = Optional[Tuple[int, int, int]]


def _stamp(path: str) -> _Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _fingerprint() -> Dict[str, _Stamp]:
    """What a changed plugin changes: every imported module's file, every ``sys.path`` entry (a
    distribution installed or removed changes its directory) and every ``torchx_plugins``
    sub-package directory (a plugin module added)."""
    stamps: Dict[str, _Stamp] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            stamps[path] = _stamp(path)
    for entry in sys.path:
        stamps[entry] = _stamp(entry or ".")
        plugins = os.path.join(entry, "torchx_plugins")
        if os.path.isdir(plugins):
            for sub in os.listdir(plugins):
                stamps[os.path.join(plugins, sub)] = _stamp(os.path.join(plugins, sub))
    return stamps


def _preload(name: str, target: Optional[str]) -> Callable[[], Any]:
    """The plugin's factory as the cold host loads it (a failure is raised again by each
    command, as the cold host would report it)."""
    # What every dry run and schedule uses, imported once here.
    import torchx.schedulers.api  # noqa: F401
    import torchx.schedulers.ids  # noqa: F401
    import torchx.specs._json  # noqa: F401
    from torchx.cli import _scheduler_host as host

    try:
        factory = host._factory(name, target)
    except Exception as e:
        error = e

        def fail() -> Any:
            raise error

        return fail
    return lambda: factory


def _listen(path: str) -> Optional[socket.socket]:
    """A socket listening on ``path``, or None if another warm host already serves it."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
    except OSError:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
            return None  # it serves: the CLI connects to it
        except OSError:
            os.unlink(path)  # a dead host's socket
            listener.bind(path)
        finally:
            probe.close()
    listener.listen(64)
    return listener


def _hello(conn: socket.socket) -> Tuple[Dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    try:
        while not data.endswith(b"\n"):
            more = conn.recv(1 << 16)
            if not more:
                break
            data += more
        return json.loads(data), fds
    except Exception:
        for fd in fds:
            os.close(fd)
        raise


def _child(name: str, load: Callable[[], Any], hello: Dict[str, Any], fds: list[int]) -> None:
    """In the forked process: become the command's host and never return."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setpgid(0, 0)  # as the CLI starts a cold host: killed with what it started
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(hello["env"])
        os.chdir(hello["cwd"])
        from torchx.cli import _scheduler_host as host

        code = host.serve(name, load)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def main() -> int:
    path, idle = sys.argv[1], float(sys.argv[2])
    name = sys.argv[3]
    target = sys.argv[4] if len(sys.argv) > 4 else None
    os.setsid()  # outlives the command (and its terminal) that started it
    load = _preload(name, target)
    if threading.active_count() > 1:
        print("unforkable: the plugin started threads when imported", flush=True)
        return 0
    listener = _listen(path)
    print("ready", flush=True)
    if listener is None:
        return 0
    listening_on = os.stat(path).st_ino
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    try:
        _serve_forks(listener, path, listening_on, idle, name, load)
    finally:
        _stop_listening(listener, path, listening_on)
    return 0


def _stop_listening(listener: socket.socket, path: str, inode: int) -> None:
    """Closes ``listener`` and removes its path, unless another host has bound it since."""
    if listener.fileno() < 0:
        return
    listener.close()
    if _stamp(path) is not None and os.stat(path).st_ino == inode:
        os.unlink(path)


def _serve_forks(
    listener: socket.socket,
    path: str,
    inode: int,
    idle: float,
    name: str,
    load: Callable[[], Any],
) -> None:
    fingerprint = _fingerprint()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    hosts: Dict[int, Optional[socket.socket]] = {}  # pid -> the CLI's connection
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "reap")
    listening = True
    while listening or hosts:
        events = selector.select(None if hosts else idle)
        if not events and not hosts:
            return  # idle
        for key, _ in events:
            if key.data == "reap":
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            elif key.data == "accept":
                conn, _ = listener.accept()
                if _fingerprint() != fingerprint:
                    _send(conn, {"stale": True})
                    conn.close()
                    selector.unregister(listener)
                    _stop_listening(listener, path, inode)
                    listening = False
                    continue
                try:
                    hello, fds = _hello(conn)
                except Exception:
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    conn.close()
                    for other in hosts.values():
                        if other is not None:
                            other.close()
                    _child(name, load, hello, fds)
                for fd in fds:
                    os.close(fd)
                _send(conn, {"pid": pid})
                hosts[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
            else:
                # The CLI closed its connection: its host ends when its stdin closes.
                gone = hosts.get(key.data)
                if gone is not None:
                    selector.unregister(gone)
                    gone.close()
                    hosts[key.data] = None
        _reap(hosts, selector)


def _reap(hosts: Dict[int, Optional[socket.socket]], selector: selectors.BaseSelector) -> None:
    """Tells each CLI whose host exited how it ended."""
    while hosts:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = hosts.pop(pid, None)
        if conn is not None:
            _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
            selector.unregister(conn)
            conn.close()


def _send(conn: socket.socket, message: Dict[str, Any]) -> None:
    try:
        conn.sendall((json.dumps(message) + "\n").encode())
    except OSError:
        pass  # the CLI is gone


if __name__ == "__main__":
    sys.exit(main())
