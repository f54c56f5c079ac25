"""Records the bytes between c10d TCPStore clients and a server, for the fixtures under
engine/store/tests/fixtures/ (test support, never product code).

    python3 wire_tap.py LISTEN_PORT TARGET_PORT OUT_FILE

Listens on 127.0.0.1:LISTEN_PORT, forwards every connection to 127.0.0.1:TARGET_PORT and appends to
OUT_FILE one line per chunk as it passes: "C<conn> <hex>" for client to server, "S<conn> <hex>" for
server to client. Runs until killed. How the fixtures were recorded: see record_fixtures.py.
"""
import socket
import sys
import threading

listen_port, target_port, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
out = open(out_path, "a", buffering=1)


def pump(src, dst, tag):
    while True:
        try:
            data = src.recv(65536)
        except OSError:
            data = b""
        if not data:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            return
        with lock:
            out.write(f"{tag} {data.hex()}\n")
        dst.sendall(data)


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen_port))
srv.listen(64)
print("TAP", srv.getsockname()[1], flush=True)
n = 0
while True:
    c, _ = srv.accept()
    s = socket.create_connection(("127.0.0.1", target_port))
    for sock in (c, s):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pump, args=(c, s, f"C{n}"), daemon=True).start()
    threading.Thread(target=pump, args=(s, c, f"S{n}"), daemon=True).start()
    n += 1
