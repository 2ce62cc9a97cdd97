"""A TCP gate between a process and a real service on loopback: open, it forwards every
connection to the service; closed, it refuses new connections and cuts the open ones, as a
restarting or unreachable server would. The service itself is never stopped."""

from __future__ import annotations

import socket
import threading


class TcpGate:
    def __init__(self, target_port: int, *, host: str = "127.0.0.1") -> None:
        self.host, self.target_port = host, target_port
        probe = socket.socket()
        probe.bind((host, 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._server: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()

    def open(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((self.host, self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def close(self) -> None:
        """Refuse from now on, and cut every forwarded connection."""
        server, self._server = self._server, None
        if server is not None:
            try:  # wakes the thread blocked in accept(); close() alone leaves it listening
                server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            server.close()
        with self._lock:
            conns, self._conns = self._conns, set()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection((self.host, self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
