"""The interactive console on a pseudo-terminal, as an operator meets it:
stdin being a terminal, and --console /dev/pts/N (the serial path). Types a
partial command, presses Tab, and checks it was completed and ran; history
(Up re-runs), Ctrl-C, '?', paging, and the terminal put back on exit."""
import os
import pty
import select
import signal
import subprocess
import tempfile
import termios
import time

from harness import PATIENCE, Failure, check, keel_cmd, main

UP = b"\x1b[A"


class Console:
    """keel with its console on a pty; we hold the master side."""

    def __init__(self, serial=False):
        self.master, self.slave = pty.openpty()
        self.buf = b""
        self.mark = 0
        self.log = tempfile.TemporaryFile()
        if serial:
            self.proc = subprocess.Popen(keel_cmd("--console", os.ttyname(self.slave)),
                                         stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                         start_new_session=True)
        else:
            self.proc = subprocess.Popen(keel_cmd(), stdin=self.slave, stdout=self.slave,
                                         stderr=self.slave, start_new_session=True)

    def _read(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.master, 4096)
        except OSError:  # EIO: every slave fd is closed
            return False
        self.buf += data
        return bool(data)

    def expect(self, needle, timeout=PATIENCE):
        """Waits for `needle` after the last match; returns the text up to it."""
        if isinstance(needle, str):
            needle = needle.encode()
        deadline = time.time() + timeout
        while True:
            i = self.buf.find(needle, self.mark)
            if i >= 0:
                seen = self.buf[self.mark:i + len(needle)]
                self.mark = i + len(needle)
                return seen.decode(errors="replace")
            if time.time() > deadline or (not self._read(0.2) and self.proc.poll() is not None):
                self.fail("no %r in the console output" % needle)

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        os.write(self.master, data)

    def wait(self, timeout=PATIENCE):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.fail("keel did not exit")
        while self._read(0.1):
            pass
        return rc

    def fail(self, msg):
        self.proc.kill()
        self.proc.wait()
        self.log.seek(0)
        raise Failure("%s\n--- console ---\n%r\n--- stdout/stderr ---\n%s" %
                      (msg, self.buf.decode(errors="replace"), self.log.read().decode(errors="replace")))

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)
        self.log.close()


def lflag(fd):
    return termios.tcgetattr(fd)[3]


def test_stdin_pty_tab_history_ctrl_c():
    c = Console()
    try:
        c.expect("Type 'help'")
        c.expect("keel> ")
        check(not lflag(c.slave) & termios.ECHO, "raw mode: the editor echoes, not the tty")
        # Tab completes a partial command, which then runs.
        c.send("show po\t")
        c.expect("keel> show ports ")
        c.send("\r")
        c.expect("Rx-pkts")
        c.expect("keel> ")
        # Up recalls it, Enter runs it again.
        c.send(UP)
        c.expect("show ports")
        c.send("\r")
        c.expect("Rx-pkts")
        c.expect("keel> ")
        # Ctrl-C abandons a line: it never runs.
        c.send("show bo\x03")
        c.expect("^C")
        c.send("vers\t\r")
        seen = c.expect("HAL backends")
        check("Board:" not in seen, "the abandoned line did not run: %r" % seen)
        c.expect("keel> ")
        # '?' lists what can come next, with help, and keeps the line.
        c.send("show ?")
        c.expect("ports, their link and packet counters")
        c.expect("keel> show ")
        c.send("\x15")  # ^U
        # Paging: --More--, q stops.
        c.send("terminal length 5\rhelp\r")
        c.expect("--More--")
        c.send("q")
        c.expect("keel> ")
        c.send("exit\r")
        rc = c.wait()
        check(rc == 0, "exit status 0, got %d" % rc)
        lf = lflag(c.slave)
        check(lf & termios.ECHO and lf & termios.ICANON, "terminal settings restored on exit")
    finally:
        c.close()


def test_serial_console_pty():
    c = Console(serial=True)
    try:
        c.expect("Type 'help'")
        c.expect("keel> ")
        attrs = termios.tcgetattr(c.slave)
        check(attrs[4] == termios.B115200 and attrs[5] == termios.B115200,
              "the board's console_baud (115200) was set")
        check(not attrs[3] & termios.ICANON, "the UART is raw")
        c.send("vers\t")
        c.expect("keel> version ")
        c.send("\r")
        c.expect("HAL backends")
        c.expect("keel> ")
        c.send("xconnect p0 p\t\t")  # ambiguous: the second Tab lists the ports
        c.expect("p0  p1")
        c.send("1\r")
        c.expect("keel> ")
        c.send("show ports --format json\r")
        c.expect('"xconnect":"p1"')
        c.expect("keel> ")
        # Edit a recalled line: Up Up, ^A, "no ", ^E, ^W -> "no xconnect p0 ".
        c.send(UP + UP + b"\x01no \x05\x17\r")
        c.expect("keel> ")
        c.send("show ports --format json\r")
        c.expect('"xconnect":null')
        c.expect("keel> ")
        c.send("\x04")  # ^D on an empty line ends the session
        rc = c.wait()
        if rc != 0:
            c.fail("exit status 0, got %d" % rc)  # with keel's stderr (a sanitizer's report goes there)
    finally:
        c.close()


def test_sigterm_restores_terminal():
    c = Console()
    try:
        c.expect("keel> ")
        c.send("show b")
        c.expect("show b")
        c.proc.send_signal(signal.SIGTERM)
        rc = c.wait()
        if rc != 0:
            c.fail("clean shutdown on SIGTERM, got %d" % rc)
        lf = lflag(c.slave)
        check(lf & termios.ECHO and lf & termios.ICANON, "terminal settings restored on SIGTERM")
    finally:
        c.close()


def test_console_device_errors():
    p = subprocess.run(keel_cmd("--console", "/nonexistent/ttyX"), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=PATIENCE)
    check(p.returncode == 1 and "console '/nonexistent/ttyX'" in p.stderr, "missing device named", p)
    p = subprocess.run(keel_cmd("--console", "/dev/null"), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=PATIENCE)
    check(p.returncode == 1 and "not a terminal" in p.stderr, "not a terminal", p)


if __name__ == "__main__":
    main([test_stdin_pty_tab_history_ctrl_c, test_serial_console_pty, test_sigterm_restores_terminal,
          test_console_device_errors])
