"""The daemon's stats socket, read without nng: its REQ/REP protocol over
ipc:// is small enough to speak with the standard library.

The wire (nng's SP over IPC): each side first sends 8 bytes, 0x00 'S' 'P'
0x00, its protocol number (16 bits, big-endian: REQ0 48, REP0 49) and two
zero bytes; then every message is a byte 0x01, a 64-bit big-endian length
and the payload. A REQ payload starts with a 32-bit request id with its high
bit set, which the reply repeats before its body. The daemon answers the
body "stats" with its JSON document (docs/operations.md).
"""
import json
import os
import socket
import struct

_REQ0, _REP0 = 48, 49


def beside(control_address):
    """stats.sock in the folder of an ipc:// control socket (the daemon's default)."""
    if not control_address or not control_address.startswith("ipc://"):
        raise ValueError("no stats address: set TILEOPS_STATS_ADDRESS")
    return "ipc://" + os.path.join(os.path.dirname(control_address[6:]), "stats.sock")


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the stats socket closed the connection")
        buf += chunk
    return buf


def fetch(address, timeout=5.0):
    """The stats document of the daemon at `address` (ipc:// only), as a dict."""
    if not address.startswith("ipc://"):
        raise ValueError("stats: only ipc:// addresses are supported, not %s" % address)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(address[6:])
        s.sendall(b"\x00SP\x00" + struct.pack(">HH", _REQ0, 0))
        hdr = _recv_exact(s, 8)
        if hdr[:4] != b"\x00SP\x00" or struct.unpack(">H", hdr[4:6])[0] != _REP0:
            raise ConnectionError("%s does not speak nng REP" % address)
        req_id = 0x80000001
        body = struct.pack(">I", req_id) + b"stats"
        s.sendall(b"\x01" + struct.pack(">Q", len(body)) + body)
        while True:
            kind, n = struct.unpack(">BQ", _recv_exact(s, 9))
            payload = _recv_exact(s, n)
            if kind == 1 and payload[:4] == struct.pack(">I", req_id):
                return json.loads(payload[4:].decode())
    finally:
        s.close()
