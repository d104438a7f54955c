"""A minimal RESP client for the chaos harness: one connection per call, so
that a stopped or restarting server costs only that call."""

import socket


class RedisError(Exception):
    pass


def _encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def _read(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RedisError(rest.decode(errors="replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read(f) for _ in range(n)]
    raise ConnectionError("unexpected reply")


def redis_call(port, *args, timeout=5.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(_encode(args))
        with s.makefile("rb") as f:
            return _read(f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
