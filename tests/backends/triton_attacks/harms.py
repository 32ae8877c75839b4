"""The harm each attack kernel does (the body of its ``_harm``), with the places the test plants:
@PUBLIC@ (a world-readable canary), @PRIVATE@ (a root-only 0600 canary), @MARKER@ (a file that
must not appear), @PORT@ (a listener on 127.0.0.1), @VICTIM@ (a process that must stay alive)."""

HARMS = {
    "reads_files": (
        "a file outside its buffers: two planted canaries and /etc/passwd, printed to the log",
        """
    for path in ("@PUBLIC@", "@PRIVATE@", "/etc/passwd"):
        print("READ", open(path).read())
""",
    ),
    "reads_environment": (
        "the worker's and its own environment (where API keys live), printed to the log",
        """
    import os
    print("ENV", dict(os.environ))
    print("ENV", open(f"/proc/{os.getppid()}/environ").read())
""",
    ),
    "opens_socket": (
        "a TCP connection to a listener on the machine, sending a canary",
        """
    import socket
    with socket.socket() as s:
        s.connect(("127.0.0.1", @PORT@))
        s.sendall(b"exfiltrated")
""",
    ),
    "starts_process": (
        "a shell that creates a file",
        """
    import os
    os.system("touch @MARKER@")
""",
    ),
    "writes_file": (
        "a file created outside its buffers",
        """
    with open("@MARKER@", "w") as f:
        f.write("written")
""",
    ),
    "signals_process": (
        "a signal to another process on the machine",
        """
    import os, signal
    os.kill(@VICTIM@, signal.SIGKILL)
""",
    ),
    "harms_from_a_thread": (
        "a thread of its own that opens a socket (every thread carries the filter)",
        """
    import socket, threading
    def send():
        with socket.socket() as s:
            s.connect(("127.0.0.1", @PORT@))
            s.sendall(b"exfiltrated")
    t = threading.Thread(target=send)
    t.start()
    t.join()
""",
    ),
}
